package originverify

import (
	"strings"

	"github.com/distribution/reference"
)

// dockerHub is the name Docker Hub images carry once normalised, and the
// one spelling this package uses for every alias of that registry.
const dockerHub = "docker.io"

// dockerHubEndpoint is the host Docker Hub's registry API answers on, the
// one containerd resolves docker.io to.
const dockerHubEndpoint = "registry-1.docker.io"

// RegistryHost returns the registry an image reference names, lowercased:
// "docker.io" for Docker Hub names ("busybox", "library/busybox",
// "index.docker.io/…", "registry-1.docker.io/…"), otherwise the host[:port]
// as written. A reference that does not parse gives an error matching
// ErrInvalidReference.
func RegistryHost(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", &OriginError{Reference: truncate(image, maxReferenceInError), Message: err.Error(), Err: ErrInvalidReference}
	}
	return canonicalRegistry(reference.Domain(named)), nil
}

// CredentialHost returns the registry host a credential's ServerAddress
// names, in the form RegistryHost returns: without scheme, path and
// trailing slash, lowercased, with Docker Hub's aliases as "docker.io".
// "https://index.docker.io/v1/" gives "docker.io", "Registry.Example:5000/"
// gives "registry.example:5000".
func CredentialHost(serverAddress string) string {
	host := strings.TrimSpace(serverAddress)
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+len("://"):]
	}
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	return canonicalRegistry(host)
}

// canonicalRegistry lowercases host and folds Docker Hub's aliases.
func canonicalRegistry(host string) string {
	host = strings.ToLower(host)
	switch host {
	case "index.docker.io", dockerHubEndpoint:
		return dockerHub
	}
	return host
}

// endpointHost is the host[:port] the registry API of registry (as
// RegistryHost gives it) is asked on.
func endpointHost(registry string) string {
	if registry == dockerHub {
		return dockerHubEndpoint
	}
	return registry
}

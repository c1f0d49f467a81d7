package originverify

import (
	"github.com/distribution/reference"

	"github.com/pullrecords/pullrecords/imageruntime"
)

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
	return imageruntime.RegistryHost(reference.Domain(named)), nil
}

// endpointHost is the host[:port] the registry API of registry (as
// RegistryHost gives it) is asked on.
func endpointHost(registry string) string {
	if registry == imageruntime.DockerHub {
		return dockerHubEndpoint
	}
	return registry
}

package imageruntime

import "strings"

// DockerHub is the one spelling RegistryHost gives Docker Hub.
const DockerHub = "docker.io"

// RegistryHost returns the registry host s names, in one spelling for
// every place a registry is written: a credential's ServerAddress
// ("https://index.docker.io/v1/"), a Docker config key, a flag value, or
// the domain of a parsed image reference. The scheme, any path and
// surrounding space are cut and the host is lowercased; Docker Hub's names
// (docker.io, index.docker.io, registry-1.docker.io) are all DockerHub. The
// port stays: host and host:5000 are different registries. It returns ""
// when s names no host.
func RegistryHost(s string) string {
	h := strings.TrimSpace(s)
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+len("://"):]
	}
	if i := strings.IndexByte(h, '/'); i >= 0 {
		h = h[:i]
	}
	h = strings.ToLower(h)
	switch h {
	case "index.docker.io", "registry-1.docker.io":
		return DockerHub
	}
	return h
}

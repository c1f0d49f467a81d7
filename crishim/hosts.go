package crishim

import (
	"strings"

	"github.com/distribution/reference"
)

// dockerHub is the one name of Docker Hub's registry here, as
// reference.Domain spells it for a Docker Hub image.
const dockerHub = "docker.io"

// normalizeHost returns the registry host a Docker config key or a
// mirror-only flag names: the scheme and any path are cut ("https://host/v1/"
// is "host"), the host is lowercased, and Docker Hub's names (docker.io,
// index.docker.io, registry-1.docker.io) are one. The port stays: host and
// host:5000 are different registries. It returns "" for a key with no host.
func normalizeHost(key string) string {
	h := strings.TrimSpace(key)
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+len("://"):]
	}
	if i := strings.IndexByte(h, '/'); i >= 0 {
		h = h[:i]
	}
	h = strings.ToLower(h)
	switch h {
	case "index.docker.io", "registry-1.docker.io":
		return dockerHub
	}
	return h
}

// parsedImage is what the gate needs of an image string.
type parsedImage struct {
	host       string // normalised registry host
	repository string // fully qualified repository name, host included
	digest     string // the reference's digest, "" for a tag-only reference
}

// parseImage parses image as the runtime does (a Docker Hub short name is
// docker.io/library/…).
func parseImage(image string) (parsedImage, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return parsedImage{}, err
	}
	p := parsedImage{
		host:       normalizeHost(reference.Domain(named)),
		repository: named.Name(),
	}
	if c, ok := named.(reference.Canonical); ok {
		p.digest = c.Digest().String()
	}
	return p, nil
}

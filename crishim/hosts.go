package crishim

import (
	"github.com/distribution/reference"

	"github.com/pullrecords/pullrecords/imageruntime"
)

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
		host:       imageruntime.RegistryHost(reference.Domain(named)),
		repository: named.Name(),
	}
	if c, ok := named.(reference.Canonical); ok {
		p.digest = c.Digest().String()
	}
	return p, nil
}

package originverify

import (
	"github.com/distribution/reference"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// target is what one Verify asks the origin for.
type target struct {
	// registry is the registry as RegistryHost gives it.
	registry string
	// endpoint is the host[:port] asked (registry-1.docker.io for
	// docker.io).
	endpoint string
	// repository is the repository path ("library/busybox").
	repository string
	// reference is the tag, or the digest when the image names one.
	reference string
	// digest is the digest the image names, "" for a tag.
	digest string
}

// parseTarget parses image as containerd does: normalised (Docker Hub
// short names), tag "latest" when neither tag nor digest is given, and by
// digest alone when both are.
func parseTarget(image string) (target, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return target{}, &OriginError{Reference: truncate(image, maxReferenceInError), Message: err.Error(), Err: ErrInvalidReference}
	}
	registry := imageruntime.RegistryHost(reference.Domain(named))
	t := target{registry: registry, endpoint: endpointHost(registry), repository: reference.Path(named)}
	switch r := named.(type) {
	case reference.Digested:
		t.digest = r.Digest().String()
		t.reference = t.digest
	case reference.Tagged:
		t.reference = r.Tag()
	default:
		t.reference = "latest"
	}
	return t, nil
}

// fail builds the OriginError for this target.
func (t target) fail(sentinel error, status int, message string) *OriginError {
	return &OriginError{
		Registry:   t.registry,
		Repository: t.repository,
		Reference:  t.reference,
		StatusCode: status,
		Message:    message,
		Err:        sentinel,
	}
}

package pullmanager

import (
	"errors"
	"fmt"

	"github.com/distribution/reference"

	"github.com/pullrecords/pullrecords/internal/imageref"
)

// MappingKey returns the key under which a pulled record maps credentials
// for image, exactly as the kubelet (v1.37) computes it: image must parse as
// a reference (reference.Parse, which does not normalise), and its tag and
// digest are then cut off the raw string. Nothing else changes, so
// "busybox:1.36" gives "busybox", "library/busybox:1" gives
// "library/busybox" and "docker.io/library/busybox@sha256:…" gives
// "docker.io/library/busybox": three different keys, as upstream. An image
// that does not parse gives an error matching ErrInvalidImageName.
//
// The key is a prefix of image (no copy); computing it allocates nothing
// unless image is invalid.
func MappingKey(image string) (string, error) {
	if key, ok := imageref.TrimTagDigest(image); ok {
		return key, nil
	}
	return "", invalidImageName(image, func(s string) error { _, err := reference.Parse(s); return err })
}

// NormalizeImageName returns the fully qualified repository name of image
// without tag or digest, as reference.ParseNormalizedNamed(image).Name()
// returns it: "busybox:1.36" and "docker.io/library/busybox@sha256:…" both
// give "docker.io/library/busybox". It is the mapping key of the opt-in
// WithNormalizedImageNames mode, not the kubelet's. An image that does not
// parse gives an error matching ErrInvalidImageName.
func NormalizeImageName(image string) (string, error) {
	if name, ok := imageref.NormalizedName(image); ok {
		return name, nil
	}
	return "", invalidImageName(image, func(s string) error { _, err := reference.ParseNormalizedNamed(s); return err })
}

// invalidImageName is the error for an image string imageref rejected,
// with the reason distribution/reference gives (parse is only called on
// this failure path, never on a check that succeeds).
func invalidImageName(image string, parse func(string) error) error {
	cause := parse(image)
	if cause == nil {
		cause = errors.New("not a valid reference")
	}
	return fmt.Errorf("%w %q: %w", ErrInvalidImageName, truncateForError(image), cause)
}

// truncateForError keeps error messages bounded whatever a pod spec holds.
func truncateForError(s string) string {
	const max = 300
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// keyFunc computes a mapping key from an image string. hit reports whether
// the result came from a cache (always false without one).
type keyFunc func(image string) (key string, hit bool, err error)

// upstreamKey is MappingKey as a keyFunc. It needs no cache: it allocates
// nothing and reads the string once.
func upstreamKey(image string) (string, bool, error) {
	key, err := MappingKey(image)
	return key, false, err
}

// normalizedKeys caches NormalizeImageName results for the whole process:
// the result is a pure function of the string, so managers and policies
// share it, and a cached name is not allocated again.
var normalizedKeys = newNameCache[imageKey](nameCacheEntries, nameCacheBytes)

type imageKey struct {
	key string
	err error
}

// maxCachedImage bounds the image strings the name cache keeps. Valid
// references have no length limit (a registry host name is unbounded), but
// pod specs hold short ones; longer strings are parsed each time, in linear
// time, and never fill the cache.
const maxCachedImage = 512

// normalizeCached is NormalizeImageName through the process-wide cache.
func normalizeCached(image string) (string, bool, error) {
	if len(image) > maxCachedImage {
		key, err := NormalizeImageName(image)
		return key, false, err
	}
	if v, ok := normalizedKeys.get(image); ok {
		return v.key, true, v.err
	}
	key, err := NormalizeImageName(image)
	normalizedKeys.put(image, imageKey{key: key, err: err}, len(image)+len(key))
	return key, false, err
}

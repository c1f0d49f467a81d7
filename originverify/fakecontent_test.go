package originverify

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
)

// image is an image's blobs, from which its manifest is made.
type image struct {
	config []byte
	layers [][]byte
}

func (img image) blobs() [][]byte { return append([][]byte{img.config}, img.layers...) }

// manifest is img's OCI image manifest.
func (img image) manifest() []byte {
	doc := manifestDoc{SchemaVersion: 2, MediaType: mediaTypeOCIManifest, Config: blobDescriptor("application/vnd.oci.image.config.v1+json", img.config)}
	for _, l := range img.layers {
		doc.Layers = append(doc.Layers, *blobDescriptor("application/vnd.oci.image.layer.v1.tar+gzip", l))
	}
	return mustJSON(doc)
}

func blobDescriptor(mediaType string, b []byte) *descriptor {
	return &descriptor{MediaType: mediaType, Digest: digestOf(b), Size: int64(len(b))}
}

// indexOf is an OCI index of manifests (OCI image manifests) for platforms
// (nil: no platform).
func indexOf(children ...indexChild) []byte {
	doc := manifestDoc{SchemaVersion: 2, MediaType: mediaTypeOCIIndex}
	for _, c := range children {
		mediaType := c.mediaType
		if mediaType == "" {
			mediaType = mediaTypeOCIManifest
		}
		d := descriptor{MediaType: mediaType, Digest: digestOf(c.manifest), Size: int64(len(c.manifest)), Platform: c.platform}
		doc.Manifests = append(doc.Manifests, d)
	}
	return mustJSON(doc)
}

type indexChild struct {
	platform  *indexPlatform
	manifest  []byte
	mediaType string
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// pattern is n bytes that differ from one seed to another, and from one
// offset to the next.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// fakeContent is a node's content store: digest → bytes.
type fakeContent struct {
	mu    sync.Mutex
	blobs map[string][]byte
	// sizeErr, when set, is the error of every Size; readErr of every
	// ReadAt.
	sizeErr, readErr error
	reads            int
}

func contentOf(blobs ...[]byte) *fakeContent {
	c := &fakeContent{blobs: map[string][]byte{}}
	for _, b := range blobs {
		c.blobs[digestOf(b)] = b
	}
	return c
}

func (c *fakeContent) Size(_ context.Context, dgst string) (int64, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sizeErr != nil {
		return 0, false, c.sizeErr
	}
	b, ok := c.blobs[dgst]
	return int64(len(b)), ok, nil
}

var errShortRead = errors.New("short read")

func (c *fakeContent) ReadAt(_ context.Context, dgst string, p []byte, off int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	if c.readErr != nil {
		return 0, c.readErr
	}
	b, ok := c.blobs[dgst]
	if !ok || off < 0 || off+int64(len(p)) > int64(len(b)) {
		return 0, errShortRead
	}
	return copy(p, b[off:]), nil
}

package imageruntime

import "context"

// Image is an image the container runtime has.
type Image struct {
	ID          string
	RepoTags    []string
	RepoDigests []string
	// Size is the image's size in bytes as the runtime reports it; zero
	// when the runtime (or the source of the Image) does not say.
	Size uint64
}

// ImageLister lists the images the container runtime has.
type ImageLister interface {
	ListImages(ctx context.Context) ([]Image, error)
}

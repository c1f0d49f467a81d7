package imageruntime

import "context"

// Image is an image the container runtime has.
type Image struct {
	ID          string
	RepoTags    []string
	RepoDigests []string
}

// ImageLister lists the images the container runtime has.
type ImageLister interface {
	ListImages(ctx context.Context) ([]Image, error)
}

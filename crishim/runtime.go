package crishim

import (
	"context"

	"github.com/distribution/reference"
)

// Runtime is what the gate asks the container runtime around a pull: what
// an image name points to, and how to take back a name that a refused pull
// created. Over containerd, cri/criproxy's ContainerdRuntime implements it
// with the CRI's ImageStatus and containerd's images service.
type Runtime interface {
	// ImageStatus returns the image the runtime holds under name (a name
	// as the kubelet sends it), or ok=false when it holds none.
	ImageStatus(ctx context.Context, name string) (img RuntimeImage, ok bool, err error)
	// RemoveName removes the image name (the runtime's own, fully
	// qualified spelling, as RuntimeName gives it) if, and only if, it
	// still resolves to the image imageID. It never removes content or any
	// other name; a name already gone is not an error.
	RemoveName(ctx context.Context, name, imageID string) error
	// RemoveUnnamed removes the image imageID if no name but its ID
	// points to it any more (what is left of a refused pull of content the
	// node did not hold before); an image with a name is left alone.
	RemoveUnnamed(ctx context.Context, imageID string) error
}

// RuntimeImage is what the runtime says of one image.
type RuntimeImage struct {
	// ID is the image ID (containerd: the config digest), what PullImage
	// answers as the image reference.
	ID string
	// RepoDigests are the image's "repository@digest" names, every
	// repository that points to it.
	RepoDigests []string
}

// digestsFor returns the manifest digests img is held under in
// repository (fully qualified, as reference.Named.Name gives it).
func (img RuntimeImage) digestsFor(repository string) []string {
	var out []string
	for _, rd := range img.RepoDigests {
		named, err := reference.ParseNormalizedNamed(rd)
		if err != nil {
			continue
		}
		if c, ok := named.(reference.Canonical); ok && named.Name() == repository {
			out = append(out, c.Digest().String())
		}
	}
	return out
}

// RuntimeName returns the name a CRI runtime stores for image: fully
// qualified, "latest" when neither tag nor digest is given, and the digest
// alone when both are (containerd's CRI plugin names images so).
func RuntimeName(image string) (string, error) {
	named, err := reference.ParseDockerRef(image)
	if err != nil {
		return "", err
	}
	return named.String(), nil
}

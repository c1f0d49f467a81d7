package nodegate

import (
	"context"
	"fmt"

	"github.com/pullrecords/pullrecords/cri/containerdapi"
	"github.com/pullrecords/pullrecords/crishim"
)

// Runtime implements crishim.Runtime over a CRI image service and, when
// the runtime is containerd, its images service.
type Runtime struct {
	images Images
	names  *containerdapi.Images // nil: not containerd
}

var _ crishim.Runtime = Runtime{}

// New returns the runtime over images; names is containerd's images
// service (Stores), nil when the runtime is not containerd.
func New(images Images, names *containerdapi.Images) Runtime {
	return Runtime{images: images, names: names}
}

// ImageStatus reports the image name resolves to.
func (r Runtime) ImageStatus(ctx context.Context, name string) (crishim.RuntimeImage, bool, error) {
	img, err := r.images.ImageStatus(ctx, name)
	if err != nil || img == nil {
		return crishim.RuntimeImage{}, false, err
	}
	return crishim.RuntimeImage{ID: img.GetId(), RepoDigests: img.GetRepoDigests()}, true, nil
}

// RemoveName removes name while it resolves to imageID.
func (r Runtime) RemoveName(ctx context.Context, name, imageID string) error {
	if r.names == nil {
		return fmt.Errorf("removing the name %s: %w", name, ErrCannotRemoveName)
	}
	img, ok, err := r.ImageStatus(ctx, name)
	switch {
	case err != nil:
		return fmt.Errorf("removing the name %s: %w", name, err)
	case !ok:
		return nil
	case img.ID != imageID:
		return fmt.Errorf("removing the name %s: %w (it names %s)", name, ErrNameMoved, img.ID)
	}
	target, ok, err := r.names.Target(ctx, name)
	if err != nil || !ok {
		return err
	}
	return r.names.RemoveName(ctx, name, target)
}

// RemoveUnnamed removes the image imageID when no name but its ID is left.
func (r Runtime) RemoveUnnamed(ctx context.Context, imageID string) error {
	img, err := r.images.ImageStatus(ctx, imageID)
	if err != nil {
		return err
	}
	if img == nil || len(img.GetRepoTags()) > 0 || len(img.GetRepoDigests()) > 0 {
		return nil
	}
	return r.images.RemoveImage(ctx, imageID)
}

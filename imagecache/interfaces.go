package imagecache

import (
	"context"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// ImageService is the part of a container runtime's image service the
// manager uses; *cri.ImageService implements it, and so can a runtime shim's
// own client. Its errors are classified by the methods described at
// IsTransient, IsUnauthorized and IsTimeout.
type ImageService interface {
	// ImageStatus returns the image the runtime resolves image to, or nil
	// when the runtime does not have it.
	ImageStatus(ctx context.Context, image string) (*imageruntime.Image, error)
	// PullImage pulls image with the registry credential auth (nil for an
	// anonymous pull) and returns its imageRef. The manager sets only
	// Username and Password.
	PullImage(ctx context.Context, image string, auth *imageruntime.AuthConfig) (string, error)
	// RemoveImage removes image; removing an absent image is not an error.
	RemoveImage(ctx context.Context, image string) error
}

// recordPruner is implemented by pull managers that can delete the pulled
// record of an image the caller removed (*pullmanager.PullManager does): under
// the record's lock, and only if imageGone still says the runtime lacks the
// image. A purge uses it; without it records are left to the kubelet's image
// garbage collection.
type recordPruner interface {
	PruneImagePulledRecord(ctx context.Context, imageRef string, imageGone func(context.Context) (bool, error)) error
}

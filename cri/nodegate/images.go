package nodegate

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Images is the part of a CRI image service the gate's runtime uses.
type Images interface {
	// ImageStatus returns the image image resolves to, nil when the
	// runtime has none.
	ImageStatus(ctx context.Context, image string) (*runtimeapi.Image, error)
	// RemoveImage removes the image image resolves to, with every name it
	// has; an image already gone is not an error.
	RemoveImage(ctx context.Context, image string) error
}

// FromClient presents a CRI image service client (a connection to the
// runtime's socket) as Images.
func FromClient(c runtimeapi.ImageServiceClient) Images { return clientImages{c} }

type clientImages struct{ c runtimeapi.ImageServiceClient }

func (c clientImages) ImageStatus(ctx context.Context, image string) (*runtimeapi.Image, error) {
	resp, err := c.c.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return nil, err
	}
	return resp.GetImage(), nil
}

func (c clientImages) RemoveImage(ctx context.Context, image string) error {
	_, err := c.c.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

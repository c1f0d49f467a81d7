package agent

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri"
)

// Guard is what the agent asks the container runtime just before a
// removal, beyond presence: the image's tags and pin, and the images of
// the node's containers. NewCRIGuard answers it through the CRI.
type Guard interface {
	// Image returns the image ref (a reference or an image ID) resolves
	// to, or nil when the runtime has none.
	Image(ctx context.Context, ref string) (*GuardImage, error)
	// ContainerImages returns, for every container the runtime has in any
	// state, the image names it reports (CRI Container.imageRef and
	// Container.image.image), in no particular order.
	ContainerImages(ctx context.Context) ([]string, error)
}

// GuardImage is the runtime's image as a removal check needs it.
type GuardImage struct {
	ID       string
	RepoTags []string
	// Pinned is CRI Image.pinned: the runtime keeps the image (containerd
	// pins its sandbox image); it must not be removed.
	Pinned bool
}

// NewCRIGuard returns a Guard that asks the CRI runtime behind conn
// (ImageStatus and ListContainers of CRI v1).
func NewCRIGuard(conn grpc.ClientConnInterface) Guard {
	return &criGuard{images: runtimeapi.NewImageServiceClient(conn), runtime: runtimeapi.NewRuntimeServiceClient(conn)}
}

type criGuard struct {
	images  runtimeapi.ImageServiceClient
	runtime runtimeapi.RuntimeServiceClient
}

// guardCallTimeout bounds each of the Guard's CRI calls.
const guardCallTimeout = 30 * time.Second

func (g *criGuard) Image(ctx context.Context, ref string) (*GuardImage, error) {
	ctx, cancel := context.WithTimeout(ctx, guardCallTimeout)
	defer cancel()
	resp, err := g.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return nil, fmt.Errorf("CRI ImageStatus %q: %w", ref, err)
	}
	img := resp.GetImage()
	if img == nil {
		return nil, nil
	}
	return &GuardImage{ID: img.GetId(), RepoTags: img.GetRepoTags(), Pinned: img.GetPinned()}, nil
}

func (g *criGuard) ContainerImages(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, guardCallTimeout)
	defer cancel()
	// No filter: every container in every state (a stopped container's
	// image is still the image a restart needs).
	resp, err := g.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers: %w", err)
	}
	var out []string
	for _, c := range resp.GetContainers() {
		if r := c.GetImageRef(); r != "" {
			out = append(out, r)
		}
		if r := c.GetImage().GetImage(); r != "" {
			out = append(out, r)
		}
	}
	return out, nil
}

// DialCRIGuard connects to a CRI endpoint (unix:///path, as cri.Dial takes)
// and returns a Guard over that connection, and the connection, which the
// caller closes when the agent is done.
func DialCRIGuard(endpoint string) (Guard, *grpc.ClientConn, error) {
	conn, err := cri.NewConn(endpoint)
	if err != nil {
		return nil, nil, err
	}
	return NewCRIGuard(conn), conn, nil
}

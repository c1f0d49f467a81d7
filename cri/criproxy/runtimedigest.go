package criproxy

import (
	"context"

	"github.com/distribution/reference"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// RuntimeDigest returns a function that asks the runtime behind conn
// (ImageStatus) which manifest digest it holds image at: the digest of the
// image's repository digest ("repo@sha256:…") whose repository is the
// asked image's, compared fully qualified ("busybox" and
// "docker.io/library/busybox" are one repository). It answers ok=false
// when image is not a reference, the runtime does not hold it, holds it
// without a digest for that repository, or the call fails.
func RuntimeDigest(conn *grpc.ClientConn) func(ctx context.Context, image string) (string, bool) {
	images := runtimeapi.NewImageServiceClient(conn)
	return func(ctx context.Context, image string) (string, bool) {
		named, err := reference.ParseNormalizedNamed(image)
		if err != nil {
			return "", false
		}
		resp, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
		if err != nil {
			klog.FromContext(ctx).V(4).Info("ImageStatus failed; taking the image as absent", "image", image, "err", err)
			return "", false
		}
		for _, rd := range resp.GetImage().GetRepoDigests() {
			ref, err := reference.ParseNormalizedNamed(rd)
			if err != nil {
				continue
			}
			if c, ok := ref.(reference.Canonical); ok && c.Name() == named.Name() {
				return c.Digest().String(), true
			}
		}
		return "", false
	}
}

package nodegate

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/pullrecords/pullrecords/cri/containerdapi"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// emptyDigest is the digest of no bytes: a well-formed digest every
// containerd answers for (mostly "not held") without side effects.
const emptyDigest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Stores returns containerd's content store and images service over conn
// (the runtime's socket) in namespace, after one probe. A runtime that is
// not containerd gives nil, nil and no error: proofs then fetch whole
// blobs, and a refused pull's names cannot be taken back. A runtime that
// cannot be asked is an error.
func Stores(ctx context.Context, conn *grpc.ClientConn, namespace string) (imageruntime.Content, *containerdapi.Images, error) {
	content := containerdapi.NewContent(conn, namespace)
	_, _, err := content.Size(ctx, emptyDigest)
	switch {
	case errors.Is(err, containerdapi.ErrNotContainerd):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("asking the runtime for containerd's content store: %w", err)
	}
	return content, containerdapi.NewImages(conn, namespace), nil
}

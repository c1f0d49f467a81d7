package containerdapi

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// DefaultNamespace is the containerd namespace the CRI plugin keeps the
// kubelet's images and content in.
const DefaultNamespace = "k8s.io"

// namespaceKey is the gRPC metadata key containerd reads a call's
// namespace from; a call without it fails with FailedPrecondition
// ("namespace is required").
const namespaceKey = "containerd-namespace"

// Method names, as containerd serves them.
const (
	methodInfo   = "/containerd.services.content.v1.Content/Info"
	methodRead   = "/containerd.services.content.v1.Content/Read"
	methodGet    = "/containerd.services.images.v1.Images/Get"
	methodDelete = "/containerd.services.images.v1.Images/Delete"
)

// client is what Content and Images share: the caller's connection and the
// namespace every call is made in.
type client struct {
	conn      *grpc.ClientConn
	namespace string
}

func newClient(conn *grpc.ClientConn, namespace string) client {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	return client{conn: conn, namespace: namespace}
}

func (c client) withNamespace(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, namespaceKey, c.namespace)
}

// invoke makes one unary call with an encoded request and returns the
// encoded answer.
func (c client) invoke(ctx context.Context, method string, req []byte) ([]byte, error) {
	var resp rawMessage
	if err := c.conn.Invoke(c.withNamespace(ctx), method, &rawMessage{b: req}, &resp, callCodec); err != nil {
		return nil, err
	}
	return resp.b, nil
}

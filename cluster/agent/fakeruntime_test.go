package agent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri/critest"
)

// servePinning serves the fake CRI runtime f on a unix socket until the
// test ends, as a runtime that pins images: an ImageStatus answer whose
// image ID is a key of pinned says pinned, as containerd says of its
// sandbox image (critest itself pins nothing). It returns the endpoint.
func servePinning(t *testing.T, f *critest.ImageService, pinned *sync.Map) string {
	t.Helper()
	pin := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if r, ok := resp.(*runtimeapi.ImageStatusResponse); ok && err == nil && r.GetImage() != nil {
			if _, ok := pinned.Load(r.GetImage().GetId()); ok {
				r.Image.Pinned = true
			}
		}
		return resp, err
	}
	dir, err := os.MkdirTemp("", "agentcri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "cri.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(pin))
	f.Register(s)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return "unix://" + path
}

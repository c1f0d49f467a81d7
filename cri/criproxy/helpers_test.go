package criproxy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri/criproxy"
	"github.com/pullrecords/pullrecords/cri/critest"
)

// socketPath is a unix socket path in a fresh test directory, short enough
// for a socket address (t.TempDir grows with the test's name).
func socketPath(t testing.TB, name string) string {
	t.Helper()
	dir := t.TempDir()
	if len(dir)+len(name) > 100 {
		var err error
		if dir, err = os.MkdirTemp("", "criproxy"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	return filepath.Join(dir, name)
}

// dial connects to a unix socket path.
func dial(t testing.TB, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// startRuntime serves the fake runtime f and the register functions on a
// unix socket and returns a connection to it.
func startRuntime(t testing.TB, f *critest.ImageService, register ...func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	if f != nil {
		register = append(register, f.Register)
	}
	return dial(t, critest.Start(t, register...).Path())
}

// startServer serves a grpc.Server made with opts and set up by register.
func startServer(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	path := socketPath(t, "rt.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return dial(t, path)
}

// startProxy serves a proxy in front of runtime and returns a connection
// to the proxy, and the proxy.
func startProxy(t testing.TB, runtime *grpc.ClientConn, gate criproxy.Gate, opts ...criproxy.Option) (*grpc.ClientConn, *criproxy.Proxy) {
	t.Helper()
	path := socketPath(t, "proxy.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := criproxy.New(runtime, gate, opts...)
	served := make(chan error, 1)
	go func() { served <- p.Serve(lis) }()
	t.Cleanup(func() {
		p.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return dial(t, path), p
}

// gate is a recording Gate that admits everything unless refuse says no.
type gate struct {
	refuse func(req *runtimeapi.PullImageRequest) error
	// refuseAfter, when set, refuses a pull after the runtime answered.
	refuseAfter func(resp *runtimeapi.PullImageResponse) error

	mu        sync.Mutex
	asked     []*runtimeapi.PullImageRequest
	succeeded []*runtimeapi.PullImageResponse
}

func (g *gate) GatePull(ctx context.Context, req *runtimeapi.PullImageRequest, pull func(context.Context) (*runtimeapi.PullImageResponse, error)) error {
	g.mu.Lock()
	g.asked = append(g.asked, req)
	g.mu.Unlock()
	if g.refuse != nil {
		if err := g.refuse(req); err != nil {
			return err
		}
	}
	resp, err := pull(ctx)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.succeeded = append(g.succeeded, resp)
	refuseAfter := g.refuseAfter
	g.mu.Unlock()
	if refuseAfter != nil {
		return refuseAfter(resp)
	}
	return nil
}

func (g *gate) counts() (asked, succeeded int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.asked), len(g.succeeded)
}

// bytesCodec moves []byte messages, for tests that send or receive exact
// frames.
type bytesCodec struct{}

func (bytesCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("bytesCodec: %T", v)
	}
	return *b, nil
}

func (bytesCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("bytesCodec: %T", v)
	}
	*b = append([]byte(nil), data...)
	return nil
}

func (bytesCodec) Name() string { return "proto" }

// pulls counts the PullImage calls the fake runtime received.
func pulls(f *critest.ImageService) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Method == critest.PullImage {
			n++
		}
	}
	return n
}

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pullrecords/pullrecords/cri/critest"
)

// newFakeCRI returns the fake CRI image service of the scripts and tests,
// with images present and two conventions on top of critest's: a repository
// with a "private" path segment (registry.example.com/private/app) needs
// username "robot" and password "s3cret", and a pull from one with a
// "missing" segment fails NotFound ("no such image").
func newFakeCRI(images ...string) (*critest.ImageService, error) {
	f := critest.NewImageService()
	f.RequireAuth(func(repo string) bool { return strings.Contains(repo, "/private/") }, "robot", "s3cret")
	f.Intercept(critest.PullImage, func(_ context.Context, c critest.Call) error {
		if ref, err := critest.Canonical(c.Image); err == nil && strings.Contains(ref, "/missing/") {
			return status.Error(codes.NotFound, "no such image")
		}
		return nil
	})
	for _, image := range images {
		if _, err := f.AddImage(image); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// startFakeCRI serves newFakeCRI(images...) until the test ends and returns
// it with its endpoint.
func startFakeCRI(t *testing.T, images ...string) (*critest.ImageService, string) {
	t.Helper()
	f, err := newFakeCRI(images...)
	if err != nil {
		t.Fatal(err)
	}
	return f, f.Serve(t)
}

// cmdFakeCRI: fakecri SOCKET [IMAGE...] — serve newFakeCRI(IMAGE...) on
// SOCKET until the script ends.
func cmdFakeCRI(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: fakecri SOCKET [IMAGE...]")
	}
	f, err := newFakeCRI(args[1:]...)
	ts.Check(err)
	srv, err := critest.Listen(ts.MkAbs(args[0]), f.Register)
	ts.Check(err)
	ts.Defer(srv.Stop)
}

// cmdGRPCNotCRI: grpcnotcri SOCKET — a gRPC server without the image service.
func cmdGRPCNotCRI(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: grpcnotcri SOCKET")
	}
	srv, err := critest.Listen(ts.MkAbs(args[0]))
	ts.Check(err)
	ts.Defer(srv.Stop)
}

// cmdCRIID: criid IMAGE — print the ID the fake CRI gives IMAGE.
func cmdCRIID(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: criid IMAGE")
	}
	id, err := critest.ImageID(args[0])
	ts.Check(err)
	ts.Stdout().Write([]byte(id + "\n"))
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/distribution/reference"
	"github.com/rogpeppe/go-internal/testscript"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeCRI is a CRI image service over a map. Repositories whose path has a
// "private" segment need username "robot" and password "s3cret".
type fakeCRI struct {
	runtimeapi.UnimplementedImageServiceServer
	mu     sync.Mutex
	images map[string]*runtimeapi.Image // by ID
}

func fakeID(tag string) string {
	sum := sha256.Sum256([]byte("fake content of " + tag))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func canonical(image string) (name, tag string, err error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", "", err
	}
	return named.Name(), reference.TagNameOnly(named).String(), nil
}

func (f *fakeCRI) add(tag string) string {
	id := fakeID(tag)
	img, ok := f.images[id]
	if !ok {
		img = &runtimeapi.Image{Id: id, Size: 1000}
		f.images[id] = img
	}
	if !slices.Contains(img.RepoTags, tag) {
		img.RepoTags = append(img.RepoTags, tag)
	}
	return id
}

func (f *fakeCRI) find(image string) *runtimeapi.Image {
	if img, ok := f.images[image]; ok {
		return img
	}
	_, tag, err := canonical(image)
	if err != nil {
		return nil
	}
	for _, img := range f.images {
		if slices.Contains(img.RepoTags, tag) {
			return img
		}
	}
	return nil
}

func (f *fakeCRI) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &runtimeapi.ListImagesResponse{}
	for _, img := range f.images {
		resp.Images = append(resp.Images, img)
	}
	sort.Slice(resp.Images, func(i, j int) bool { return resp.Images[i].Id < resp.Images[j].Id })
	return resp, nil
}

func (f *fakeCRI) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ImageStatusResponse{Image: f.find(req.GetImage().GetImage())}, nil
}

func (f *fakeCRI) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	name, tag, err := canonical(req.GetImage().GetImage())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if strings.Contains(name, "/private/") {
		a := req.GetAuth()
		if a.GetUsername() != "robot" || a.GetPassword() != "s3cret" {
			return nil, status.Error(codes.Unknown, "failed to pull: unexpected status from registry: 401 Unauthorized")
		}
	}
	if strings.Contains(name, "/missing/") {
		return nil, status.Error(codes.NotFound, "no such image")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.PullImageResponse{ImageRef: f.add(tag)}, nil
}

func (f *fakeCRI) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if img := f.find(req.GetImage().GetImage()); img != nil {
		delete(f.images, img.Id)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (f *fakeCRI) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

// serveGRPC serves srv on a unix socket at path until the script ends.
func serveGRPC(ts *testscript.TestScript, path string, register func(*grpc.Server)) {
	l, err := net.Listen("unix", ts.MkAbs(path))
	ts.Check(err)
	srv := grpc.NewServer()
	register(srv)
	go srv.Serve(l)
	ts.Defer(srv.Stop)
}

// cmdFakeCRI: fakecri SOCKET [IMAGE...] — serve a fake CRI image service with
// IMAGEs present.
func cmdFakeCRI(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: fakecri SOCKET [IMAGE...]")
	}
	f := &fakeCRI{images: map[string]*runtimeapi.Image{}}
	for _, image := range args[1:] {
		_, tag, err := canonical(image)
		ts.Check(err)
		f.add(tag)
	}
	serveGRPC(ts, args[0], func(s *grpc.Server) { runtimeapi.RegisterImageServiceServer(s, f) })
}

// cmdGRPCNotCRI: grpcnotcri SOCKET — a gRPC server without the image service.
func cmdGRPCNotCRI(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: grpcnotcri SOCKET")
	}
	serveGRPC(ts, args[0], func(*grpc.Server) {})
}

// cmdCRIID: criid IMAGE — print the ID the fake CRI gives IMAGE.
func cmdCRIID(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: criid IMAGE")
	}
	_, tag, err := canonical(args[0])
	ts.Check(err)
	ts.Stdout().Write([]byte(fakeID(tag) + "\n"))
}

package criproxy_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri/criproxy"
	"github.com/pullrecords/pullrecords/cri/critest"
)

func TestRuntimeDigest(t *testing.T) {
	f := critest.NewImageService()
	for _, image := range []string{"busybox:1.37", "registry.example/team/app:v2"} {
		if _, err := f.AddImage(image); err != nil {
			t.Fatal(err)
		}
	}
	srv := critest.Start(t, f.Register)
	digestOf := criproxy.RuntimeDigest(dial(t, srv.Path()))
	ctx := context.Background()
	busybox, _ := critest.Digest("busybox:1.37")
	app, _ := critest.Digest("registry.example/team/app:v2")
	for _, tc := range []struct {
		image, want string
		ok          bool
	}{
		{"busybox:1.37", busybox, true},
		{"docker.io/library/busybox:1.37", busybox, true},
		{"library/busybox@" + busybox, busybox, true},
		{"registry.example/team/app:v2", app, true},
		{"busybox:1.36", "", false},
		{"registry.example/team/other:v2", "", false},
		{"NOT A REF", "", false},
	} {
		if got, ok := digestOf(ctx, tc.image); got != tc.want || ok != tc.ok {
			t.Errorf("RuntimeDigest(%q) = %q, %t; want %q, %t", tc.image, got, ok, tc.want, tc.ok)
		}
	}
	srv.Stop()
	if got, ok := digestOf(ctx, "busybox:1.37"); ok {
		t.Errorf("RuntimeDigest with the runtime gone = %q, true; want false", got)
	}
}

// statusService answers every ImageStatus with image.
type statusService struct {
	runtimeapi.UnimplementedImageServiceServer
	image *runtimeapi.Image
}

func (s *statusService) ImageStatus(context.Context, *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	return &runtimeapi.ImageStatusResponse{Image: s.image}, nil
}

func TestRuntimeDigestMatchesRepository(t *testing.T) {
	other := "sha256:" + strings.Repeat("1", 64)
	mine := "sha256:" + strings.Repeat("2", 64)
	for _, tc := range []struct {
		name        string
		repoDigests []string
		want        string
		ok          bool
	}{
		// The same content under another repository (or registry) says
		// nothing of this repository.
		{"other repository only", []string{"mirror.example/team/app@" + other, "docker.io/team/app@" + other}, "", false},
		{"this repository second", []string{"mirror.example/team/app@" + other, "registry.example/team/app@" + mine}, mine, true},
		{"no digests", nil, "", false},
		{"garbage", []string{"not a digest", "registry.example/team/app:v2"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &statusService{image: &runtimeapi.Image{Id: "sha256:" + strings.Repeat("3", 64), RepoDigests: tc.repoDigests}}
			conn := startServer(t, func(s *grpc.Server) { runtimeapi.RegisterImageServiceServer(s, svc) })
			if got, ok := criproxy.RuntimeDigest(conn)(context.Background(), "registry.example/team/app:v2"); got != tc.want || ok != tc.ok {
				t.Errorf("RuntimeDigest = %q, %t; want %q, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

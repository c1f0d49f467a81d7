package critest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/cri/critest"
	"github.com/pullrecords/pullrecords/imageruntime"
)

func dial(t *testing.T, endpoint string, opts ...cri.Option) *cri.ImageService {
	t.Helper()
	s, err := cri.Dial(context.Background(), endpoint, opts...)
	if err != nil {
		t.Fatalf("Dial(%q): %v", endpoint, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustID(t *testing.T, image string) string {
	t.Helper()
	id, err := critest.ImageID(image)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustDigest(t *testing.T, image string) string {
	t.Helper()
	d, err := critest.Digest(image)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCanonical(t *testing.T) {
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for in, want := range map[string]string{
		"busybox":                        "docker.io/library/busybox:latest",
		"busybox:1.37":                   "docker.io/library/busybox:1.37",
		"docker.io/library/busybox:1.37": "docker.io/library/busybox:1.37",
		"127.0.0.1:5000/private:v1":      "127.0.0.1:5000/private:v1",
		"quay.io/a/b@" + d:               "quay.io/a/b@" + d,
		"quay.io/a/b:t@" + d:             "quay.io/a/b@" + d,
	} {
		if got, err := critest.Canonical(in); err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "UPPER", "a b"} {
		if got, err := critest.Canonical(bad); err == nil {
			t.Errorf("Canonical(%q) = %q, want an error", bad, got)
		}
	}
}

func TestIDs(t *testing.T) {
	// The formula is part of the API: scripts compare IDs printed in
	// another process.
	if got, want := mustID(t, "busybox"), "sha256:"; !strings.HasPrefix(got, want) || len(got) != len(want)+64 {
		t.Errorf("ImageID(busybox) = %q, want sha256: and 64 hex digits", got)
	}
	if mustID(t, "busybox") != mustID(t, "docker.io/library/busybox:latest") {
		t.Error("ImageID differs between forms of one reference")
	}
	if mustID(t, "busybox:1.36") == mustID(t, "busybox:1.37") {
		t.Error("ImageID is the same for two tags")
	}
	if mustDigest(t, "busybox:1.37") == mustID(t, "busybox:1.37") {
		t.Error("Digest equals ImageID")
	}
}

func TestLifecycle(t *testing.T) {
	f := critest.NewImageService()
	id, err := f.AddImage("busybox:1.37")
	if err != nil {
		t.Fatal(err)
	}
	if id != mustID(t, "busybox:1.37") {
		t.Errorf("AddImage = %q, want ImageID's %q", id, mustID(t, "busybox:1.37"))
	}
	s := dial(t, f.Serve(t))
	ctx := context.Background()

	busybox := &imageruntime.Image{
		ID:          id,
		RepoTags:    []string{"docker.io/library/busybox:1.37"},
		RepoDigests: []string{"docker.io/library/busybox@" + mustDigest(t, "busybox:1.37")},
		Size:        critest.ImageSize,
	}
	for _, ref := range []string{"busybox:1.37", "docker.io/library/busybox:1.37", id, busybox.RepoDigests[0]} {
		got, err := s.ImageStatus(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(busybox, got); diff != "" {
			t.Errorf("ImageStatus(%q) (-want +got):\n%s", ref, diff)
		}
	}
	for _, ref := range []string{"busybox", "busybox:1.36", "sha256:" + strings.Repeat("0", 64), "NOT A REF"} {
		if got, err := s.ImageStatus(ctx, ref); err != nil || got != nil {
			t.Errorf("ImageStatus(%q) = %v, %v; want nil, nil", ref, got, err)
		}
	}

	ref, err := s.PullImage(ctx, "nginx", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ref != mustID(t, "nginx:latest") {
		t.Errorf("PullImage(nginx) = %q, want %q", ref, mustID(t, "nginx:latest"))
	}
	// Pulling again, or by the digest the image carries, yields it again.
	for _, again := range []string{"docker.io/library/nginx:latest", "nginx@" + mustDigest(t, "nginx")} {
		if got, err := s.PullImage(ctx, again, nil); err != nil || got != ref {
			t.Errorf("PullImage(%q) = %q, %v; want %q", again, got, err, ref)
		}
	}
	// A digest nothing carries is a new image known by its digest only.
	other := "quay.io/x/y@sha256:" + strings.Repeat("ab", 32)
	otherID, err := s.PullImage(ctx, other, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Image(otherID); got == nil || len(got.RepoTags) != 0 || !cmp.Equal(got.RepoDigests, []string{other}) {
		t.Errorf("image pulled by digest = %v, want no tags and digest %s", got, other)
	}

	list, err := s.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("ListImages = %v, want 3 images", list)
	}
	for i := 1; i < len(list); i++ {
		if list[i-1].ID >= list[i].ID {
			t.Errorf("ListImages not in ID order: %v", list)
		}
	}

	// RemoveImage by any name removes the image; an absent one is no error.
	if err := s.RemoveImage(ctx, "busybox:1.37"); err != nil {
		t.Fatal(err)
	}
	if f.Image(id) != nil || f.Image(busybox.RepoDigests[0]) != nil {
		t.Error("busybox still present after RemoveImage")
	}
	if err := s.RemoveImage(ctx, "busybox:1.37"); err != nil {
		t.Errorf("second RemoveImage: %v", err)
	}
	if n := len(f.Images()); n != 2 {
		t.Errorf("%d images after the remove, want 2", n)
	}

	_, err = s.PullImage(ctx, "NOT A REF", nil)
	if ce := (*cri.CallError)(nil); !errors.As(err, &ce) || ce.Code != codes.InvalidArgument {
		t.Errorf("PullImage of a bad reference = %v, want InvalidArgument", err)
	}
}

func TestRequireAuth(t *testing.T) {
	f := critest.NewImageService()
	f.RequireAuth(critest.Repository("127.0.0.1:5000/private"), "alice", "s3cret")
	f.RequireAuth(func(repo string) bool { return strings.Contains(repo, "/private/") }, "robot", "pw")
	s := dial(t, f.Serve(t))
	ctx := context.Background()

	for _, tc := range []struct {
		image string
		auth  *imageruntime.AuthConfig
		ok    bool
	}{
		{"127.0.0.1:5000/private:v1", nil, false},
		{"127.0.0.1:5000/private:v1", &imageruntime.AuthConfig{Username: "alice", Password: "wrong"}, false},
		{"127.0.0.1:5000/private:v1", &imageruntime.AuthConfig{Username: "robot", Password: "pw"}, false},
		{"127.0.0.1:5000/private:v1", &imageruntime.AuthConfig{Username: "alice", Password: "s3cret"}, true},
		{"registry.example.com/private/app:1", nil, false},
		{"registry.example.com/private/app:1", &imageruntime.AuthConfig{Username: "robot", Password: "pw"}, true},
		{"127.0.0.1:5000/public:v1", nil, true},
	} {
		_, err := s.PullImage(ctx, tc.image, tc.auth)
		switch {
		case tc.ok && err != nil:
			t.Errorf("PullImage(%s, %v) = %v, want success", tc.image, tc.auth, err)
		case !tc.ok && !errors.Is(err, cri.ErrUnauthorized):
			t.Errorf("PullImage(%s, %v) = %v, want ErrUnauthorized", tc.image, tc.auth, err)
		}
	}
	if f.Image("127.0.0.1:5000/private:v1") == nil {
		t.Error("private image absent after the authorised pull")
	}

	// The call log has every call, with the credentials sent.
	var pulls []string
	for _, c := range f.Calls() {
		if c.Method == critest.PullImage {
			pulls = append(pulls, c.Image+" "+c.Auth.GetUsername()+":"+c.Auth.GetPassword())
		}
	}
	want := []string{
		"127.0.0.1:5000/private:v1 :",
		"127.0.0.1:5000/private:v1 alice:wrong",
		"127.0.0.1:5000/private:v1 robot:pw",
		"127.0.0.1:5000/private:v1 alice:s3cret",
		"registry.example.com/private/app:1 :",
		"registry.example.com/private/app:1 robot:pw",
		"127.0.0.1:5000/public:v1 :",
	}
	if diff := cmp.Diff(want, pulls); diff != "" {
		t.Errorf("PullImage calls (-want +got):\n%s", diff)
	}
	if c := f.Calls()[0]; c.Method != critest.ImageFsInfo {
		t.Errorf("first call %v, want Dial's ImageFsInfo", c)
	}
}

func TestIntercept(t *testing.T) {
	f := critest.NewImageService()
	f.Intercept(critest.PullImage, func(_ context.Context, c critest.Call) error {
		if strings.Contains(c.Image, "/missing/") {
			return status.Error(codes.NotFound, "no such image")
		}
		return nil
	})
	f.Intercept(critest.PullImage, func(_ context.Context, c critest.Call) error {
		if strings.Contains(c.Image, "broken") {
			return status.Error(codes.Unavailable, "registry down")
		}
		return nil
	})
	f.Intercept(critest.ImageStatus, critest.Block)
	f.Intercept(critest.RemoveImage, critest.Fail(status.Error(codes.FailedPrecondition, "in use")))
	s := dial(t, f.Serve(t), cri.WithCallTimeout(50*time.Millisecond))
	ctx := context.Background()

	if _, err := s.PullImage(ctx, "reg.example/missing/x:1", nil); !errors.Is(err, cri.ErrNotFound) {
		t.Errorf("PullImage of a missing image = %v, want ErrNotFound", err)
	}
	if _, err := s.PullImage(ctx, "reg.example/broken:1", nil); !cri.IsTransient(err) {
		t.Errorf("PullImage of a broken image = %v, want a transient error", err)
	}
	if _, err := s.PullImage(ctx, "reg.example/fine:1", nil); err != nil {
		t.Errorf("PullImage of a fine image = %v", err)
	}
	if len(f.Images()) != 1 {
		t.Errorf("images = %v, want only the fine one", f.Images())
	}
	if _, err := s.ImageStatus(ctx, "reg.example/fine:1"); !errors.Is(err, cri.ErrTimeout) {
		t.Errorf("blocked ImageStatus = %v, want ErrTimeout", err)
	}
	if err := s.RemoveImage(ctx, "reg.example/fine:1"); err == nil || f.Image("reg.example/fine:1") == nil {
		t.Errorf("failed RemoveImage = %v, image present %t; want an error and the image kept", err, f.Image("reg.example/fine:1") != nil)
	}
}

func TestConcurrentCalls(t *testing.T) {
	f := critest.NewImageService()
	s := dial(t, f.Serve(t))
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			image := "reg.example/app:" + string(rune('a'+i))
			if _, err := s.PullImage(ctx, image, nil); err != nil {
				t.Error(err)
			}
			if _, err := s.ListImages(ctx); err != nil {
				t.Error(err)
			}
			if _, err := s.ImageStatus(ctx, image); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(f.Images()); n != 8 {
		t.Errorf("%d images, want 8", n)
	}
}

func TestServers(t *testing.T) {
	// A server with no service is gRPC but not CRI.
	bare := critest.Start(t)
	if _, err := cri.Dial(context.Background(), bare.Endpoint()); !errors.Is(err, cri.ErrNotCRI) {
		t.Errorf("Dial of a server without services = %v, want ErrNotCRI", err)
	}
	if !strings.HasPrefix(bare.Endpoint(), "unix:///") || bare.Endpoint() != "unix://"+bare.Path() {
		t.Errorf("Endpoint() = %q, Path() = %q", bare.Endpoint(), bare.Path())
	}

	// Listen at a chosen path; Stop ends it, and may be repeated.
	path := filepath.Join(t.TempDir(), "c.sock")
	if len(path) > 100 {
		path = filepath.Join(os.TempDir(), "critest-servers.sock")
		_ = os.Remove(path)
	}
	srv, err := critest.Listen(path, critest.NewImageService().Register)
	if err != nil {
		t.Fatal(err)
	}
	s := dial(t, path)
	srv.Stop()
	srv.Stop()
	if _, err := s.ListImages(context.Background()); err == nil {
		t.Error("ListImages after Stop succeeded")
	}

	long := "/" + strings.Repeat("d", 120) + "/cri.sock"
	if _, err := critest.Listen(long); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("Listen(%d-byte path) = %v, want a path-length error", len(long), err)
	}
}

func TestAnswerPullsWithRepoDigest(t *testing.T) {
	f := critest.NewImageService()
	s := dial(t, f.Serve(t))
	ctx := context.Background()
	f.AnswerPullsWithRepoDigest(true)
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for image, want := range map[string]string{
		"reg/app:1":                           "docker.io/reg/app@" + mustDigest(t, "reg/app:1"),
		"busybox":                             "docker.io/library/busybox@" + mustDigest(t, "busybox:latest"),
		"quay.io/a/b:t@" + d:                  "quay.io/a/b@" + d,
		"docker.io/reg/app:1":                 "docker.io/reg/app@" + mustDigest(t, "reg/app:1"),
		"busybox@" + mustDigest(t, "busybox"): "docker.io/library/busybox@" + mustDigest(t, "busybox"),
	} {
		got, err := s.PullImage(ctx, image, nil)
		if err != nil || got != want {
			t.Errorf("PullImage(%q) = %q, %v; want %q", image, got, err, want)
		}
	}
	// The answer names the image ImageStatus reports by its ID.
	img, err := s.ImageStatus(ctx, "docker.io/reg/app@"+mustDigest(t, "reg/app:1"))
	if err != nil || img == nil || img.ID != mustID(t, "reg/app:1") {
		t.Errorf("ImageStatus of the answered digest = %+v, %v; want ID %s", img, err, mustID(t, "reg/app:1"))
	}
	f.AnswerPullsWithRepoDigest(false)
	if got, err := s.PullImage(ctx, "reg/app:1", nil); err != nil || got != mustID(t, "reg/app:1") {
		t.Errorf("PullImage after AnswerPullsWithRepoDigest(false) = %q, %v; want the ID %s", got, err, mustID(t, "reg/app:1"))
	}
}

func TestListContainers(t *testing.T) {
	f := critest.NewImageService()
	c := &runtimeapi.Container{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "web"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	f.SetContainers(c, &runtimeapi.Container{Id: "c2"})
	c.Id = "changed after SetContainers"
	conn, err := grpc.NewClient(f.Serve(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	resp, err := rs.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: "c2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []*runtimeapi.Container{
		{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "web"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{Id: "c2"},
	}
	if diff := cmp.Diff(want, resp.Containers, protocmp.Transform()); diff != "" {
		t.Errorf("ListContainers, filter ignored (-want +got):\n%s", diff)
	}
	if calls := f.Calls(); len(calls) != 1 || calls[0].Method != critest.ListContainers {
		t.Errorf("calls = %v, want one ListContainers", calls)
	}
	f.SetContainers()
	if resp, err := rs.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{}); err != nil || len(resp.Containers) != 0 {
		t.Errorf("ListContainers after SetContainers() = %v, %v; want none", resp, err)
	}
}

func TestSetDigest(t *testing.T) {
	f := critest.NewImageService()
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if err := f.SetDigest("reg.test/app:1", d); err != nil {
		t.Fatal(err)
	}
	id, err := f.AddImage("reg.test/app:1")
	if err != nil {
		t.Fatal(err)
	}
	img := f.Image(id)
	if img == nil || !slices.Contains(img.RepoDigests, "reg.test/app@"+d) {
		t.Fatalf("image after SetDigest = %v; want repo digest reg.test/app@%s", img, d)
	}
	if f.Image("reg.test/app@"+d) == nil {
		t.Errorf("the image is not found by the digest SetDigest gave")
	}
}

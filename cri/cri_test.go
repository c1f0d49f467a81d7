package cri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/pullrecords/pullrecords/cri/critest"
	"github.com/pullrecords/pullrecords/imageruntime"
)

func dial(t *testing.T, endpoint string, opts ...Option) *ImageService {
	t.Helper()
	s, err := Dial(context.Background(), endpoint, opts...)
	if err != nil {
		t.Fatalf("Dial(%q): %v", endpoint, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestDialErrors(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.sock")

	// A socket with nobody listening: keep the file after closing.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()

	// A gRPC server that serves only the health service.
	notCRI := critest.Start(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) }).Path()

	// Listeners that are not gRPC servers: one that answers junk, one that
	// hangs up at once, and an HTTP/1.1 server.
	junk := listen(t, filepath.Join(dir, "junk.sock"), func(c net.Conn) {
		_, _ = c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\nnot a CRI endpoint\n"))
	})
	hangup := listen(t, filepath.Join(dir, "hangup.sock"), func(net.Conn) {})
	httpSock := filepath.Join(dir, "http.sock")
	hl, err := net.Listen("unix", httpSock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	t.Cleanup(func() { _ = hs.Close() })

	tests := []struct {
		name     string
		endpoint string
		want     error
		mention  string
	}{
		{"missing socket", missing, ErrEndpointNotFound, missing},
		{"missing socket, unix scheme", "unix://" + missing, ErrEndpointNotFound, missing},
		{"tcp scheme", "tcp://127.0.0.1:1", ErrInvalidEndpoint, "tcp://"},
		{"relative path", "run/cri.sock", ErrInvalidEndpoint, "run/cri.sock"},
		// The endpoint is quoted in the message, so an empty one shows as "".
		{"empty", "", ErrInvalidEndpoint, `"": want unix:///absolute/path`},
		{"regular file", regular, ErrInvalidEndpoint, regular},
		{"nobody listening", stale, ErrEndpointNotFound, stale},
		{"grpc without image service", notCRI, ErrNotCRI, notCRI},
		{"answers junk", junk, ErrNotCRI, junk},
		{"hangs up", hangup, ErrNotCRI, hangup},
		{"http/1.1 server", httpSock, ErrNotCRI, httpSock},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Dial(context.Background(), tc.endpoint, WithCallTimeout(5*time.Second))
			if err == nil {
				s.Close()
				t.Fatalf("Dial(%q) succeeded, want %v", tc.endpoint, tc.want)
			}
			t.Logf("Dial(%q): %v", tc.endpoint, err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Dial(%q) = %v, want %v", tc.endpoint, err, tc.want)
			}
			if tc.mention == "" {
				t.Fatal("row has no text to look for in the error")
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
			for _, other := range []error{ErrEndpointNotFound, ErrInvalidEndpoint, ErrNotCRI} {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("Dial(%q) = %v, also matches %v", tc.endpoint, err, other)
				}
			}
		})
	}
}

// listen accepts connections on a unix socket at path, hands each to handle
// and closes it, until the test ends.
func listen(t *testing.T, path string, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			handle(c)
			c.Close()
		}
	})
	return path
}

func TestSocketPath(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///run/containerd/containerd.sock": "/run/containerd/containerd.sock",
		"/run/crio/crio.sock":                    "/run/crio/crio.sock",
		"unix:///a/../b.sock":                    "/b.sock",
	} {
		got, err := socketPath(in)
		if err != nil || got != want {
			t.Errorf("socketPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestImageLifecycle(t *testing.T) {
	f := critest.NewImageService()
	f.RequireAuth(critest.Repository("127.0.0.1:5000/private"), "alice", "s3cret")
	s := dial(t, f.Serve(t))
	ctx := context.Background()

	if got, err := s.ImageStatus(ctx, "127.0.0.1:5000/private:v1"); err != nil || got != nil {
		t.Fatalf("ImageStatus before pull = %v, %v; want nil, nil", got, err)
	}

	// Anonymous pull of a private image is refused, permanently.
	_, err := s.PullImage(ctx, "127.0.0.1:5000/private:v1", nil)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("anonymous pull: %v, want ErrUnauthorized", err)
	}
	if IsTransient(err) {
		t.Errorf("IsTransient(%v) = true, want false", err)
	}

	auth := &imageruntime.AuthConfig{Username: "alice", Password: "s3cret", Email: "alice@example.com"}
	ref, err := s.PullImage(ctx, "127.0.0.1:5000/private:v1", auth)
	if err != nil {
		t.Fatalf("pull with auth: %v", err)
	}
	calls := f.Calls()
	gotAuth := calls[len(calls)-1].Auth
	if gotAuth.GetUsername() != "alice" || gotAuth.GetPassword() != "s3cret" {
		t.Errorf("server saw auth %q/%q, want alice/s3cret", gotAuth.GetUsername(), gotAuth.GetPassword())
	}

	img, err := s.ImageStatus(ctx, "127.0.0.1:5000/private:v1")
	if err != nil {
		t.Fatal(err)
	}
	digest, err := critest.Digest("127.0.0.1:5000/private:v1")
	if err != nil {
		t.Fatal(err)
	}
	want := &imageruntime.Image{ID: ref, RepoTags: []string{"127.0.0.1:5000/private:v1"}, RepoDigests: []string{"127.0.0.1:5000/private@" + digest}, Size: critest.ImageSize}
	if diff := cmp.Diff(want, img); diff != "" {
		t.Errorf("ImageStatus (-want +got):\n%s", diff)
	}
	list, err := s.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantList := []imageruntime.Image{{ID: ref, RepoTags: want.RepoTags, RepoDigests: want.RepoDigests, Size: critest.ImageSize}}
	if diff := cmp.Diff(wantList, list); diff != "" {
		t.Errorf("ListImages (-want +got):\n%s", diff)
	}

	if err := s.RemoveImage(ctx, "127.0.0.1:5000/private:v1"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ImageStatus(ctx, "127.0.0.1:5000/private:v1"); err != nil || got != nil {
		t.Fatalf("ImageStatus after remove = %v, %v; want nil, nil", got, err)
	}
	if err := s.RemoveImage(ctx, "127.0.0.1:5000/private:v1"); err != nil {
		t.Errorf("second RemoveImage: %v, want nil", err)
	}

	var _ imageruntime.ImageLister = s
}

func TestNoCredentialInErrors(t *testing.T) {
	f := critest.NewImageService()
	f.Intercept(critest.PullImage, critest.Fail(status.Error(codes.Unknown, `pull "x" with user alice password hunter22 token tok-123 failed: 401 Unauthorized`)))
	s := dial(t, f.Serve(t))
	auth := &imageruntime.AuthConfig{Username: "alice", Password: "hunter22", RegistryToken: "tok-123"}
	_, err := s.PullImage(context.Background(), "x", auth)
	if err == nil {
		t.Fatal("pull succeeded")
	}
	for _, secret := range []string{"hunter22", "tok-123"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains a secret", err)
		}
	}
	if !errors.Is(err, ErrUnauthorized) {
		t.Errorf("error %v is not ErrUnauthorized", err)
	}
}

func TestTimeouts(t *testing.T) {
	f := critest.NewImageService()
	f.Intercept(critest.PullImage, critest.Block)
	f.Intercept(critest.ImageStatus, critest.Block)
	// Dial's check (ImageFsInfo) does not block.
	s := dial(t, f.Serve(t), withPullTimeout(50*time.Millisecond), WithCallTimeout(50*time.Millisecond))
	_, err := s.PullImage(context.Background(), "img:1", nil)
	if !errors.Is(err, ErrTimeout) || !IsTransient(err) {
		t.Errorf("PullImage = %v, want a transient ErrTimeout", err)
	}
	_, err = s.ImageStatus(context.Background(), "img:1")
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ImageStatus = %v, want ErrTimeout", err)
	}

	// A cancelled caller context is not transient.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.PullImage(ctx, "img:1", nil)
	if !errors.Is(err, context.Canceled) || IsTransient(err) {
		t.Errorf("PullImage with cancelled ctx = %v, want permanent context.Canceled", err)
	}
}

func TestClosed(t *testing.T) {
	s := dial(t, critest.NewImageService().Serve(t))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ImageStatus(context.Background(), "a"); !errors.Is(err, ErrClosed) {
		t.Errorf("ImageStatus after Close = %v, want ErrClosed", err)
	}
	if _, err := s.PullImage(context.Background(), "a", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("PullImage after Close = %v, want ErrClosed", err)
	}
	if _, err := s.ImageFsInfo(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("ImageFsInfo after Close = %v, want ErrClosed", err)
	}
	if _, err := s.RuntimeVersion(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("RuntimeVersion after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestIsTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unavailable", status.Error(codes.Unavailable, "x"), true},
		{"deadline", status.Error(codes.DeadlineExceeded, "x"), true},
		{"exhausted", status.Error(codes.ResourceExhausted, "x"), true},
		{"not found", status.Error(codes.NotFound, "x"), false},
		{"invalid", status.Error(codes.InvalidArgument, "x"), false},
		{"unauthenticated", status.Error(codes.Unauthenticated, "x"), false},
		{"permission", status.Error(codes.PermissionDenied, "x"), false},
		{"registry 401", status.Error(codes.Unknown, "failed: 401 Unauthorized"), false},
		{"registry 403", status.Error(codes.Unknown, "failed: 403 Forbidden"), false},
		{"registry 503", status.Error(codes.Unknown, "failed: 503 Service Unavailable"), true},
		{"connection refused", status.Error(codes.Unknown, "dial tcp 127.0.0.1:5000: connect: connection refused"), true},
		{"unknown other", status.Error(codes.Unknown, "manifest invalid"), false},
		{"context deadline", context.DeadlineExceeded, true},
		{"context canceled", context.Canceled, false},
		{"wrapped call error", fmt.Errorf("outer: %w", &CallError{Code: codes.Unavailable}), true},
		{"plain error", errors.New("boom"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsTransient(tc.err); got != tc.want {
				t.Errorf("IsTransient(%v) = %t, want %t", tc.err, got, tc.want)
			}
		})
	}
}

func TestImageFsInfoAndRuntimeVersion(t *testing.T) {
	ctx := context.Background()
	f := critest.NewImageService()
	s := dial(t, f.Serve(t))

	// Defaults: no filesystems, the fake's own name and version.
	fs, err := s.ImageFsInfo(ctx)
	if err != nil || len(fs) != 0 {
		t.Errorf("ImageFsInfo = %v, %v; want none", fs, err)
	}
	v, err := s.RuntimeVersion(ctx)
	if want := critest.DefaultRuntimeName + "://" + critest.DefaultRuntimeVersion; err != nil || v != want {
		t.Errorf("RuntimeVersion = %q, %v; want %q", v, err, want)
	}

	f.SetImageFs(
		critest.FilesystemUsage{Mountpoint: "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", UsedBytes: 123456789, InodesUsed: 4242},
		critest.FilesystemUsage{Mountpoint: "/mnt/second", UsedBytes: 1},
	)
	f.SetRuntimeVersion("containerd", "2.1.4")
	fs, err = s.ImageFsInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantFs := []FilesystemUsage{
		{Mountpoint: "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", UsedBytes: 123456789, InodesUsed: 4242},
		{Mountpoint: "/mnt/second", UsedBytes: 1},
	}
	if diff := cmp.Diff(wantFs, fs); diff != "" {
		t.Errorf("ImageFsInfo (-want +got):\n%s", diff)
	}
	if v, err := s.RuntimeVersion(ctx); err != nil || v != "containerd://2.1.4" {
		t.Errorf("RuntimeVersion = %q, %v; want containerd://2.1.4", v, err)
	}

	// Errors are CallErrors naming the CRI method.
	f.Intercept(critest.Version, critest.Fail(status.Error(codes.Unavailable, "runtime restarting")))
	f.Intercept(critest.ImageFsInfo, critest.Fail(status.Error(codes.Internal, "stat failed")))
	_, err = s.RuntimeVersion(ctx)
	if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Op != "Version" || ce.Code != codes.Unavailable || !IsTransient(err) {
		t.Errorf("RuntimeVersion with a failing runtime = %v, want a transient Version CallError", err)
	}
	_, err = s.ImageFsInfo(ctx)
	if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Op != "ImageFsInfo" || ce.Code != codes.Internal {
		t.Errorf("ImageFsInfo with a failing runtime = %v, want an Internal ImageFsInfo CallError", err)
	}
}

func TestRuntimeVersionWithoutRuntimeService(t *testing.T) {
	// An image service alone (a runtime serving images on its own socket):
	// RuntimeVersion is a CallError with code Unimplemented.
	f := critest.NewImageService()
	srv := critest.Start(t, f.RegisterImageOnly)
	s := dial(t, srv.Endpoint())
	_, err := s.RuntimeVersion(context.Background())
	if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Code != codes.Unimplemented {
		t.Errorf("RuntimeVersion = %v, want Unimplemented", err)
	}
}

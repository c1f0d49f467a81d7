package criproxy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri/critest"
)

func pullRequest(image, user, password string) *runtimeapi.PullImageRequest {
	return &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: image},
		Auth:  &runtimeapi.AuthConfig{Username: user, Password: password, ServerAddress: "registry.example"},
		SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{
			Name: "web-0", Namespace: "tenant-b", Uid: "7c6f0b1e-0000-4000-8000-000000000001",
		}},
	}
}

func TestPullImageRefusedNeverReachesRuntime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refusal  error
		wantCode codes.Code
		wantMsg  string
	}{
		{"status", status.Error(codes.PermissionDenied, `origin registry.example refused the credential for "registry.example/team/app:v2": denied`),
			codes.PermissionDenied, `origin registry.example refused the credential for "registry.example/team/app:v2": denied`},
		{"wrapped status", fmt.Errorf("verify: %w", status.Error(codes.Unavailable, "registry.example unreachable")),
			codes.Unavailable, "verify: rpc error: code = Unavailable desc = registry.example unreachable"},
		{"plain error", errors.New(`pull of "registry.example/team/app:v2" refused: registry.example: 401 Unauthorized`),
			codes.Unknown, `pull of "registry.example/team/app:v2" refused: registry.example: 401 Unauthorized`},
		// A gate error caused by a timeout is a refusal all the same, not
		// the caller's DeadlineExceeded.
		{"timeout", fmt.Errorf("registry.example: %w", context.DeadlineExceeded),
			codes.Unknown, "registry.example: context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := critest.NewImageService()
			g := &gate{refuse: func(*runtimeapi.PullImageRequest) error { return tc.refusal }}
			proxied, _ := startProxy(t, startRuntime(t, f), g)
			_, err := runtimeapi.NewImageServiceClient(proxied).PullImage(context.Background(), pullRequest("registry.example/team/app:v2", "bob", "not-alices"))
			if s := status.Convert(err); s.Code() != tc.wantCode || s.Message() != tc.wantMsg {
				t.Errorf("refused PullImage = %v; want code %s, message %q", err, tc.wantCode, tc.wantMsg)
			}
			if n := pulls(f); n != 0 {
				t.Errorf("the runtime received %d PullImage calls, want none", n)
			}
			if f.Image("registry.example/team/app:v2") != nil {
				t.Error("the image is present after a refused pull")
			}
			if asked, succeeded := g.counts(); asked != 1 || succeeded != 0 {
				t.Errorf("gate asked %d times, told of %d successes; want 1 and 0", asked, succeeded)
			}
		})
	}
}

func TestPullImageAdmitted(t *testing.T) {
	f := critest.NewImageService()
	f.RequireAuth(critest.Repository("registry.example/team/app"), "alice", "s3cret")
	g := &gate{}
	proxied, _ := startProxy(t, startRuntime(t, f), g)
	req := pullRequest("registry.example/team/app:v2", "alice", "s3cret")
	resp, err := runtimeapi.NewImageServiceClient(proxied).PullImage(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantRef, _ := critest.ImageID("registry.example/team/app:v2")
	if resp.ImageRef != wantRef {
		t.Errorf("ImageRef = %q, want %q", resp.ImageRef, wantRef)
	}
	if pulls(f) != 1 || f.Image(wantRef) == nil {
		t.Errorf("runtime pulls = %d, image present %t; want one pull and the image", pulls(f), f.Image(wantRef) != nil)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// The gate saw the whole request (credential, pod), and the response.
	if len(g.asked) != 1 || !proto.Equal(g.asked[0], req) {
		t.Errorf("gate asked with %v, want %v", g.asked, req)
	}
	if len(g.succeeded) != 1 || !proto.Equal(g.succeeded[0], resp) {
		t.Errorf("PullSucceeded got %v, want [%v]", g.succeeded, resp)
	}
}

func TestPullImageRuntimeFailureNotRecorded(t *testing.T) {
	f := critest.NewImageService()
	f.RequireAuth(critest.Repository("registry.example/team/app"), "alice", "s3cret")
	g := &gate{}
	runtime := startRuntime(t, f)
	proxied, _ := startProxy(t, runtime, g)
	req := pullRequest("registry.example/team/app:v2", "alice", "wrong")
	_, direct := runtimeapi.NewImageServiceClient(runtime).PullImage(context.Background(), req)
	_, through := runtimeapi.NewImageServiceClient(proxied).PullImage(context.Background(), req)
	if direct == nil || errText(direct) != errText(through) {
		t.Errorf("failed pull through the proxy = %v, directly %v; want the runtime's error", through, direct)
	}
	if asked, succeeded := g.counts(); asked != 1 || succeeded != 0 {
		t.Errorf("gate asked %d times, told of %d successes; want 1 and 0", asked, succeeded)
	}
}

func TestPullImageMalformedFrame(t *testing.T) {
	f := critest.NewImageService()
	g := &gate{}
	proxied, _ := startProxy(t, startRuntime(t, f), g)
	for _, bad := range [][]byte{
		{0xff},             // field 31, wire type 7: no such wire type
		{0x0a, 0x05, 0x0a}, // field 1 claims 5 bytes, 1 follows
	} {
		var out []byte
		err := proxied.Invoke(context.Background(), "/runtime.v1.ImageService/PullImage", &bad, &out, grpc.ForceCodec(bytesCodec{}))
		if s := status.Convert(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "not a runtime.v1 PullImageRequest") {
			t.Errorf("PullImage of %x = %v, want InvalidArgument", bad, err)
		}
	}
	if asked, _ := g.counts(); asked != 0 || pulls(f) != 0 {
		t.Errorf("gate asked %d times, runtime pulled %d times; want neither", asked, pulls(f))
	}
}

// rawImageService is a runtime's ImageService that records the exact
// PullImage frames it receives and answers each with resp.
type rawImageService struct {
	frames chan []byte
	resp   []byte
}

func (r *rawImageService) register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "runtime.v1.ImageService",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "PullImage", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			r.frames <- in
			return &r.resp, nil
		}}},
	}, struct{}{})
}

func TestPullImageForwardsOriginalFrame(t *testing.T) {
	req, err := proto.Marshal(pullRequest("registry.example/team/app:v2", "alice", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	// A field this build does not know (a newer kubelet's) must reach the
	// runtime: a re-encoding of the decoded request could lose or reorder
	// it.
	req = protowire.AppendTag(req, 99, protowire.BytesType)
	req = protowire.AppendString(req, "from a newer kubelet")
	resp, _ := proto.Marshal(&runtimeapi.PullImageResponse{ImageRef: "sha256:" + strings.Repeat("ab", 32)})
	resp = protowire.AppendTag(resp, 98, protowire.VarintType)
	resp = protowire.AppendVarint(resp, 7)
	rt := &rawImageService{frames: make(chan []byte, 1), resp: resp}
	g := &gate{}
	proxied, _ := startProxy(t, startServer(t, rt.register, grpc.ForceServerCodec(bytesCodec{})), g)

	var out []byte
	if err := proxied.Invoke(context.Background(), "/runtime.v1.ImageService/PullImage", &req, &out, grpc.ForceCodec(bytesCodec{})); err != nil {
		t.Fatal(err)
	}
	if got := <-rt.frames; !cmp.Equal(got, req) {
		t.Errorf("the runtime received %x, want the caller's frame %x", got, req)
	}
	if !cmp.Equal(out, resp) {
		t.Errorf("the caller received %x, want the runtime's frame %x", out, resp)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	want := &runtimeapi.PullImageResponse{ImageRef: "sha256:" + strings.Repeat("ab", 32)}
	if len(g.succeeded) != 1 || cmp.Diff(want, g.succeeded[0], protocmp.Transform(), protocmp.IgnoreUnknown()) != "" {
		t.Errorf("PullSucceeded got %v, want [%v]", g.succeeded, want)
	}
}

// A gate that refuses after the runtime pulled (what was pulled is not what
// it proved) gets its status to the caller, never the runtime's OK answer.
func TestPullImageRefusedAfterThePull(t *testing.T) {
	f := critest.NewImageService()
	refusal := status.Error(codes.PermissionDenied, `the runtime pulled content the origin did not prove for this credential`)
	g := &gate{refuseAfter: func(*runtimeapi.PullImageResponse) error { return refusal }}
	proxied, _ := startProxy(t, startRuntime(t, f), g)
	resp, err := runtimeapi.NewImageServiceClient(proxied).PullImage(context.Background(), pullRequest("registry.example/team/app:v2", "bob", "pw"))
	if s := status.Convert(err); s.Code() != codes.PermissionDenied || s.Message() != status.Convert(refusal).Message() {
		t.Errorf("PullImage = %v, %v; want the gate's refusal", resp, err)
	}
	if resp != nil {
		t.Errorf("the caller got the runtime's answer %v", resp)
	}
	if pulls(f) != 1 {
		t.Errorf("the runtime received %d PullImage calls, want 1", pulls(f))
	}
}

// gateFunc is a Gate made of a function, for gates that break the contract.
type gateFunc func(ctx context.Context, req *runtimeapi.PullImageRequest, pull func(context.Context) (*runtimeapi.PullImageResponse, error)) error

func (f gateFunc) GatePull(ctx context.Context, req *runtimeapi.PullImageRequest, pull func(context.Context) (*runtimeapi.PullImageResponse, error)) error {
	return f(ctx, req, pull)
}

// A gate that answers nil without pulling, or pulls twice, does not let an
// unpulled or doubled answer through: the caller gets Internal.
func TestPullImageGateContractBroken(t *testing.T) {
	for name, g := range map[string]gateFunc{
		"admitted without pulling": func(context.Context, *runtimeapi.PullImageRequest, func(context.Context) (*runtimeapi.PullImageResponse, error)) error {
			return nil
		},
		"pulled twice": func(ctx context.Context, _ *runtimeapi.PullImageRequest, pull func(context.Context) (*runtimeapi.PullImageResponse, error)) error {
			if _, err := pull(ctx); err != nil {
				return err
			}
			_, err := pull(ctx)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := critest.NewImageService()
			proxied, _ := startProxy(t, startRuntime(t, f), g)
			_, err := runtimeapi.NewImageServiceClient(proxied).PullImage(context.Background(), pullRequest("registry.example/team/app:v2", "bob", "pw"))
			if status.Code(err) != codes.Internal {
				t.Errorf("PullImage = %v; want Internal", err)
			}
			if n := pulls(f); n > 1 {
				t.Errorf("the runtime received %d PullImage calls, want at most 1", n)
			}
		})
	}
}

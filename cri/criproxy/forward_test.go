package criproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri/critest"
)

// fakeWithContent is a fake runtime holding some images and containers.
func fakeWithContent(t testing.TB, containers int) *critest.ImageService {
	t.Helper()
	f := critest.NewImageService()
	for _, image := range []string{"busybox:1.37", "registry.example/team/app:v2", "quay.io/a/b:1"} {
		if _, err := f.AddImage(image); err != nil {
			t.Fatal(err)
		}
	}
	f.SetImageFs(critest.FilesystemUsage{Mountpoint: "/var/lib/containerd", UsedBytes: 12345, InodesUsed: 67})
	f.SetRuntimeVersion("containerd", "1.6.20")
	f.SetContainers(makeContainers(containers)...)
	return f
}

// makeContainers returns n containers shaped like a kubelet's.
func makeContainers(n int) []*runtimeapi.Container {
	out := make([]*runtimeapi.Container, n)
	for i := range out {
		out[i] = &runtimeapi.Container{
			Id:           fmt.Sprintf("%064x", i),
			PodSandboxId: fmt.Sprintf("%064x", i/2+1<<32),
			Metadata:     &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("container-%d", i), Attempt: 1},
			Image:        &runtimeapi.ImageSpec{Image: "registry.example/team/app:v2"},
			ImageRef:     fmt.Sprintf("sha256:%064x", i%7),
			State:        runtimeapi.ContainerState_CONTAINER_RUNNING,
			CreatedAt:    1700000000000000000 + int64(i),
			Labels: map[string]string{
				"io.kubernetes.container.name": fmt.Sprintf("container-%d", i),
				"io.kubernetes.pod.name":       fmt.Sprintf("pod-%d", i/2),
				"io.kubernetes.pod.namespace":  "tenant-a",
				"io.kubernetes.pod.uid":        fmt.Sprintf("%08x-0000-4000-8000-%012x", i/2, i/2),
			},
			Annotations: map[string]string{
				"io.kubernetes.container.hash":                   fmt.Sprintf("%x", i*7919),
				"io.kubernetes.container.restartCount":           "0",
				"io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
			},
			ImageId: fmt.Sprintf("sha256:%064x", i%7),
		}
	}
	return out
}

// call is one unary CRI call made on a connection.
type call struct {
	method   string
	req, out proto.Message
}

func criCalls() []call {
	return []call{
		{"/runtime.v1.ImageService/ImageStatus", &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.37"}, Verbose: true}, &runtimeapi.ImageStatusResponse{}},
		{"/runtime.v1.ImageService/ImageStatus", &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "absent:1"}}, &runtimeapi.ImageStatusResponse{}},
		{"/runtime.v1.ImageService/ListImages", &runtimeapi.ListImagesRequest{}, &runtimeapi.ListImagesResponse{}},
		{"/runtime.v1.ImageService/ListImages", &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "quay.io/a/b:1"}}}, &runtimeapi.ListImagesResponse{}},
		{"/runtime.v1.ImageService/ImageFsInfo", &runtimeapi.ImageFsInfoRequest{}, &runtimeapi.ImageFsInfoResponse{}},
		{"/runtime.v1.ImageService/RemoveImage", &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "absent:1"}}, &runtimeapi.RemoveImageResponse{}},
		{"/runtime.v1.RuntimeService/Version", &runtimeapi.VersionRequest{Version: "v1"}, &runtimeapi.VersionResponse{}},
		{"/runtime.v1.RuntimeService/ListContainers", &runtimeapi.ListContainersRequest{}, &runtimeapi.ListContainersResponse{}},
		// Unimplemented by the fake: the error must be the runtime's.
		{"/runtime.v1.RuntimeService/Status", &runtimeapi.StatusRequest{}, &runtimeapi.StatusResponse{}},
		{"/runtime.v1.RuntimeService/RunPodSandbox", &runtimeapi.RunPodSandboxRequest{}, &runtimeapi.RunPodSandboxResponse{}},
	}
}

// errText is a comparable form of a call's error.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := status.Convert(err)
	return fmt.Sprintf("%s: %s %v", s.Code(), s.Message(), s.Details())
}

func TestUnaryCallsIdenticalThroughProxy(t *testing.T) {
	f := fakeWithContent(t, 20)
	runtime := startRuntime(t, f)
	proxied, _ := startProxy(t, runtime, &gate{})
	ctx := context.Background()
	for _, c := range criCalls() {
		direct, through := proto.Clone(c.out), proto.Clone(c.out)
		errDirect := runtime.Invoke(ctx, c.method, c.req, direct)
		errProxy := proxied.Invoke(ctx, c.method, c.req, through)
		if d, p := errText(errDirect), errText(errProxy); d != p {
			t.Errorf("%s: error direct %q, through the proxy %q", c.method, d, p)
		}
		if diff := cmp.Diff(direct, through, protocmp.Transform()); diff != "" {
			t.Errorf("%s (-direct +proxy):\n%s", c.method, diff)
		}
	}
	// The calls that should answer did, with content.
	var list runtimeapi.ListContainersResponse
	if err := proxied.Invoke(ctx, "/runtime.v1.RuntimeService/ListContainers", &runtimeapi.ListContainersRequest{}, &list); err != nil || len(list.Containers) != 20 {
		t.Errorf("ListContainers through the proxy = %d containers, %v; want 20", len(list.Containers), err)
	}
	var st runtimeapi.ImageStatusResponse
	if err := proxied.Invoke(ctx, "/runtime.v1.ImageService/ImageStatus", &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.37"}}, &st); err != nil || st.GetImage() == nil {
		t.Errorf("ImageStatus through the proxy = %v, %v; want the image", st.GetImage(), err)
	}
	if err := proxied.Invoke(ctx, "/runtime.v1.RuntimeService/Status", &runtimeapi.StatusRequest{}, &runtimeapi.StatusResponse{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("Status through the proxy = %v, want the fake's Unimplemented", err)
	}
}

func TestUnknownServiceForwarded(t *testing.T) {
	echo := newEchoService()
	proxied, _ := startProxy(t, startRuntime(t, critest.NewImageService(), echo.register), &gate{})
	var out wrapperspb.StringValue
	if err := proxied.Invoke(context.Background(), echoMethod("Echo"), wrapperspb.String("hello"), &out); err != nil || out.Value != "hello back" {
		t.Errorf("Echo through the proxy = %q, %v; want %q", out.Value, err, "hello back")
	}
	// A method nobody serves is the runtime's Unimplemented, not the proxy's.
	err := proxied.Invoke(context.Background(), "/"+echoServiceName+"/Nothing", wrapperspb.String("x"), &out)
	if s := status.Convert(err); s.Code() != codes.Unimplemented || s.Message() != "unknown method Nothing for service "+echoServiceName {
		t.Errorf("unserved method through the proxy = %v, want the runtime's Unimplemented", err)
	}
}

func TestUnknownMethodOfKnownServiceForwarded(t *testing.T) {
	// A runtime newer than this build: runtime.v1.ImageService with a
	// method cri-api v0.37.2 does not have.
	runtime := startServer(t, func(s *grpc.Server) {
		s.RegisterService(&grpc.ServiceDesc{
			ServiceName: "runtime.v1.ImageService",
			HandlerType: (*any)(nil),
			Methods: []grpc.MethodDesc{{MethodName: "MadeUpInFuture", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := &wrapperspb.StringValue{}
				if err := dec(in); err != nil {
					return nil, err
				}
				return wrapperspb.String("future " + in.Value), nil
			}}},
		}, struct{}{})
	})
	proxied, _ := startProxy(t, runtime, &gate{})
	var out wrapperspb.StringValue
	if err := proxied.Invoke(context.Background(), "/runtime.v1.ImageService/MadeUpInFuture", wrapperspb.String("call"), &out); err != nil || out.Value != "future call" {
		t.Errorf("unknown method of a known service = %q, %v; want %q", out.Value, err, "future call")
	}
}

func TestServerStreaming(t *testing.T) {
	echo := newEchoService()
	proxied, _ := startProxy(t, startRuntime(t, nil, echo.register), &gate{})
	s, err := proxied.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, echoMethod("Count"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("5")); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		m := &wrapperspb.StringValue{}
		err := s.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Value)
	}
	if diff := cmp.Diff([]string{"0", "1", "2", "3", "4"}, got); diff != "" {
		t.Errorf("Count(5) through the proxy (-want +got):\n%s", diff)
	}
}

func TestClientStreamingHalfClose(t *testing.T) {
	echo := newEchoService()
	proxied, _ := startProxy(t, startRuntime(t, nil, echo.register), &gate{})
	s, err := proxied.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true}, echoMethod("Sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := s.SendMsg(wrapperspb.String(v)); err != nil {
			t.Fatal(err)
		}
	}
	// The runtime answers only after it sees the half-close.
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	m := &wrapperspb.StringValue{}
	if err := s.RecvMsg(m); err != nil || m.Value != "3:abc" {
		t.Errorf("Sum(a, b, c) through the proxy = %q, %v; want 3:abc", m.Value, err)
	}
	if err := s.RecvMsg(m); !errors.Is(err, io.EOF) {
		t.Errorf("after the answer: %v, want io.EOF", err)
	}
}

func TestBidiStreaming(t *testing.T) {
	echo := newEchoService()
	proxied, _ := startProxy(t, startRuntime(t, nil, echo.register), &gate{})
	s, err := proxied.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, echoMethod("Chat"))
	if err != nil {
		t.Fatal(err)
	}
	// Lock-step: each answer arrives before the next message is sent.
	for _, v := range []string{"one", "two"} {
		if err := s.SendMsg(wrapperspb.String(v)); err != nil {
			t.Fatal(err)
		}
		m := &wrapperspb.StringValue{}
		if err := s.RecvMsg(m); err != nil || m.Value != "echo:"+v {
			t.Fatalf("Chat answer to %q = %q, %v", v, m.Value, err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	m := &wrapperspb.StringValue{}
	if err := s.RecvMsg(m); err != nil || m.Value != "bye" {
		t.Errorf("Chat after the half-close = %q, %v; want bye", m.Value, err)
	}
	if err := s.RecvMsg(m); !errors.Is(err, io.EOF) {
		t.Errorf("Chat end = %v, want io.EOF", err)
	}
}

func TestMetadataAndStatusDetailsRoundTrip(t *testing.T) {
	echo := newEchoService()
	runtime := startRuntime(t, nil, echo.register)
	proxied, _ := startProxy(t, runtime, &gate{})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-req", "kubelet")

	for _, conn := range []struct {
		name string
		c    *grpc.ClientConn
	}{{"direct", runtime}, {"proxy", proxied}} {
		t.Run(conn.name, func(t *testing.T) {
			// Unary, failing with details.
			var header, trailer metadata.MD
			err := conn.c.Invoke(ctx, echoMethod("Echo"), wrapperspb.String("fail"), &wrapperspb.StringValue{}, grpc.Header(&header), grpc.Trailer(&trailer))
			wantErr := errText(failStatus().Err())
			if got := errText(err); got != wantErr {
				t.Errorf("Echo(fail) error = %s, want %s", got, wantErr)
			}
			if d := status.Convert(err).Details(); len(d) != 1 || !proto.Equal(d[0].(proto.Message), wrapperspb.String("the detail")) {
				t.Errorf("Echo(fail) details = %v, want the detail", d)
			}
			if got := header.Get("x-header"); !cmp.Equal(got, []string{"header of kubelet"}) {
				t.Errorf("Echo header x-header = %q", got)
			}
			if got := trailer.Get("x-trailer"); !cmp.Equal(got, []string{"trailer of kubelet"}) {
				t.Errorf("Echo trailer x-trailer = %q", got)
			}

			// Bidirectional, failing with details after a header.
			s, err := conn.c.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, echoMethod("Chat"))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SendMsg(wrapperspb.String("fail")); err != nil {
				t.Fatal(err)
			}
			h, err := s.Header()
			if err != nil || !cmp.Equal(h.Get("x-header"), []string{"header of kubelet"}) {
				t.Errorf("Chat header = %v, %v", h, err)
			}
			err = s.RecvMsg(&wrapperspb.StringValue{})
			if got := errText(err); got != wantErr {
				t.Errorf("Chat(fail) error = %s, want %s", got, wantErr)
			}
			if got := s.Trailer().Get("x-trailer"); !cmp.Equal(got, []string{"trailer of kubelet"}) {
				t.Errorf("Chat trailer x-trailer = %q", got)
			}
		})
	}
}

func TestCancellationReachesRuntime(t *testing.T) {
	echo := newEchoService()
	f := critest.NewImageService()
	statusCancelled := make(chan error, 1)
	started := make(chan struct{}, 1)
	f.Intercept(critest.ImageStatus, func(ctx context.Context, c critest.Call) error {
		started <- struct{}{}
		<-ctx.Done()
		statusCancelled <- ctx.Err()
		return status.FromContextError(ctx.Err()).Err()
	})
	proxied, _ := startProxy(t, startRuntime(t, f, echo.register), &gate{})

	t.Run("CRI unary", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := runtimeapi.NewImageServiceClient(proxied).ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
			done <- err
		}()
		<-started
		cancel()
		if err := <-statusCancelled; !errors.Is(err, context.Canceled) {
			t.Errorf("the runtime's ImageStatus ended with %v, want context.Canceled", err)
		}
		if err := <-done; status.Code(err) != codes.Canceled {
			t.Errorf("the caller got %v, want Canceled", err)
		}
	})
	t.Run("unknown unary", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- proxied.Invoke(ctx, echoMethod("Hang"), wrapperspb.String("x"), &wrapperspb.StringValue{})
		}()
		<-echo.hanging
		cancel()
		if err := <-echo.hung; !errors.Is(err, context.Canceled) {
			t.Errorf("the runtime's Hang ended with %v, want context.Canceled", err)
		}
		if err := <-done; status.Code(err) != codes.Canceled {
			t.Errorf("the caller got %v, want Canceled", err)
		}
	})
	t.Run("stream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := proxied.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, echoMethod("HangStream"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(wrapperspb.String("x")); err != nil {
			t.Fatal(err)
		}
		if err := s.RecvMsg(&wrapperspb.StringValue{}); err != nil {
			t.Fatalf("first message: %v", err)
		}
		cancel() // the runtime's handler is running now
		if err := <-echo.hung; !errors.Is(err, context.Canceled) {
			t.Errorf("the runtime's stream ended with %v, want context.Canceled", err)
		}
	})
}

func TestPullImageOfAnotherCRIVersionRefused(t *testing.T) {
	// containerd 1.6 serves runtime.v1alpha2 beside runtime.v1: a pull
	// through it would bypass the gate, so the proxy refuses it unforwarded.
	var pulls atomic.Int32
	runtime := startServer(t, func(s *grpc.Server) {
		s.RegisterService(&grpc.ServiceDesc{
			ServiceName: "runtime.v1alpha2.ImageService",
			HandlerType: (*any)(nil),
			Methods: []grpc.MethodDesc{{MethodName: "PullImage", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				pulls.Add(1)
				in := &wrapperspb.StringValue{}
				if err := dec(in); err != nil {
					return nil, err
				}
				return wrapperspb.String("pulled"), nil
			}}},
		}, struct{}{})
	})
	g := &gate{}
	proxied, _ := startProxy(t, runtime, g)
	var out wrapperspb.StringValue
	err := proxied.Invoke(context.Background(), "/runtime.v1alpha2.ImageService/PullImage", wrapperspb.String("private/image"), &out)
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("v1alpha2 PullImage through the proxy = %q, %v; want PermissionDenied", out.Value, err)
	}
	if n := pulls.Load(); n != 0 {
		t.Errorf("the runtime saw %d v1alpha2 pulls through the proxy, want 0", n)
	}
}

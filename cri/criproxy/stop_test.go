package criproxy_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/cri/criproxy"
	"github.com/pullrecords/pullrecords/cri/critest"
)

func TestStopBoundsGracefulStop(t *testing.T) {
	echo := newEchoService()
	clock := clocktesting.NewFakeClock(time.Time{})
	proxied, p := startProxy(t, startRuntime(t, nil, echo.register), &gate{}, criproxy.WithClock(clock))

	// A stream that never ends by itself, as the kubelet's
	// GetContainerEvents.
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
		t.Fatal(err)
	}

	stopped := make(chan struct{})
	go func() {
		p.Stop()
		close(stopped)
	}()
	for !clock.HasWaiters() { // Stop is waiting for the stream, on the clock
		runtime.Gosched()
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while a call was running and before its timeout")
	default:
	}
	clock.Step(criproxy.DefaultStopTimeout)
	<-stopped
	if err := s.RecvMsg(&wrapperspb.StringValue{}); status.Code(err) != codes.Unavailable {
		t.Errorf("the open stream after Stop = %v, want Unavailable", err)
	}
	if err := <-echo.hung; !errors.Is(err, context.Canceled) {
		t.Errorf("the runtime's stream ended with %v, want context.Canceled", err)
	}
}

func TestStopWithoutCallsAndServeAfterStop(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Time{})
	p := criproxy.New(startRuntime(t, critest.NewImageService()), &gate{}, criproxy.WithClock(clock))
	lis, err := net.Listen("unix", socketPath(t, "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(lis) }()
	// Serving: a call went through.
	if _, err := runtimeapi.NewRuntimeServiceClient(dial(t, lis.Addr().String())).Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	p.Stop() // nothing in flight: returns without the clock moving
	if err := <-served; err != nil {
		t.Errorf("Serve after Stop returned %v, want nil", err)
	}
	lis2, err := net.Listen("unix", socketPath(t, "p2.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(lis2); !errors.Is(err, grpc.ErrServerStopped) {
		t.Errorf("Serve on a stopped proxy = %v, want grpc.ErrServerStopped", err)
	}
}

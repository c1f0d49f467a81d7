package criproxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri/criproxy"
	"github.com/pullrecords/pullrecords/cri/critest"
)

func TestMetricsCountForwardedCalls(t *testing.T) {
	m := criproxy.NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	echo := newEchoService()
	g := &gate{refuse: func(req *runtimeapi.PullImageRequest) error {
		if strings.Contains(req.GetImage().GetImage(), "private") {
			return status.Error(codes.PermissionDenied, "denied")
		}
		return nil
	}}
	proxied, _ := startProxy(t, startRuntime(t, critest.NewImageService(), echo.register), g, criproxy.WithMetrics(m))
	ctx := context.Background()
	images := runtimeapi.NewImageServiceClient(proxied)
	for range 2 {
		if _, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}}); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = runtimeapi.NewRuntimeServiceClient(proxied).Status(ctx, &runtimeapi.StatusRequest{})
	_ = proxied.Invoke(ctx, echoMethod("Echo"), wrapperspb.String("x"), &wrapperspb.StringValue{})
	if _, err := images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "reg.example/private:1"}}); err == nil {
		t.Fatal("refused pull succeeded")
	}
	if _, err := images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "reg.example/public:1"}}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP pullrecords_shim_forwarded_calls_total CRI calls the shim forwarded to the container runtime, by method and gRPC code.
# TYPE pullrecords_shim_forwarded_calls_total counter
pullrecords_shim_forwarded_calls_total{code="OK",method="/runtime.v1.ImageService/ImageStatus"} 2
pullrecords_shim_forwarded_calls_total{code="OK",method="/runtime.v1.ImageService/PullImage"} 1
pullrecords_shim_forwarded_calls_total{code="Unimplemented",method="/runtime.v1.RuntimeService/Status"} 1
pullrecords_shim_forwarded_calls_total{code="OK",method="unknown"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "pullrecords_shim_forwarded_calls_total"); err != nil {
		t.Error(err)
	}
}

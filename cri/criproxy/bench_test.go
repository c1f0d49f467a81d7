package criproxy_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri/criproxy"
)

// benchConns are connections to one fake runtime: direct, through a proxy
// without metrics, and through a proxy with them.
func benchConns(b *testing.B, containers int) map[string]*grpc.ClientConn {
	f := fakeWithContent(b, containers)
	runtime := startRuntime(b, f)
	proxy, _ := startProxy(b, runtime, &gate{})
	withMetrics, _ := startProxy(b, runtime, &gate{}, criproxy.WithMetrics(criproxy.NewMetrics()))
	return map[string]*grpc.ClientConn{"direct": runtime, "proxy": proxy, "proxy-metrics": withMetrics}
}

func BenchmarkImageStatus(b *testing.B) {
	conns := benchConns(b, 0)
	req := &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "registry.example/team/app:v2"}}
	for _, name := range []string{"direct", "proxy", "proxy-metrics"} {
		b.Run(name, func(b *testing.B) {
			client := runtimeapi.NewImageServiceClient(conns[name])
			ctx := context.Background()
			for b.Loop() {
				resp, err := client.ImageStatus(ctx, req)
				if err != nil || resp.GetImage() == nil {
					b.Fatalf("ImageStatus = %v, %v", resp, err)
				}
			}
		})
	}
}

func BenchmarkListContainers500(b *testing.B) {
	conns := benchConns(b, 500)
	for _, name := range []string{"direct", "proxy"} {
		b.Run(name, func(b *testing.B) {
			client := runtimeapi.NewRuntimeServiceClient(conns[name])
			ctx := context.Background()
			for b.Loop() {
				resp, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
				if err != nil || len(resp.Containers) != 500 {
					b.Fatalf("ListContainers = %d containers, %v", len(resp.GetContainers()), err)
				}
			}
		})
	}
}

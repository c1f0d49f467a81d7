//go:build e2e

package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/cri/criproxy"
)

// admitAll is a gate that lets every pull through: the benchmark measures
// forwarding, not verification.
type admitAll struct{}

func (admitAll) GatePull(ctx context.Context, _ *runtimeapi.PullImageRequest, pull func(context.Context) (*runtimeapi.PullImageResponse, error)) error {
	_, err := pull(ctx)
	return err
}

// BenchmarkShimForwardingContainerd measures a forwarded unary call against
// a real containerd, directly and through the shim's proxy (in this
// process, as "pullrecords shim" serves it): ImageStatus of a present
// image, and ListImages. Compare the two with benchstat.
func BenchmarkShimForwardingContainerd(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("the e2e benchmarks start containerd and must run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	reg, err := nodetest.StartRegistry(ctx, b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(reg.Stop)
	image := reg.Host + "/bench/app:v1"
	if _, err := nodetest.PushImage(ctx, reg, image, map[string]nodetest.File{"hello.txt": {Data: []byte("bench " + randomHex(4))}}, nil, nil); err != nil {
		b.Fatal(err)
	}
	cd, err := nodetest.StartContainerd(ctx, nodetest.ContainerdOptions{Name: "bench", InsecureRegistries: []string{reg.Host}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cd.Stop)

	dial := func(endpoint string) *grpc.ClientConn {
		conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	runtimeConn := dial(cd.CRIEndpoint)
	sock := filepath.Join(b.TempDir(), "shim.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	proxy := criproxy.New(runtimeConn, admitAll{}, criproxy.WithStopTimeout(time.Second))
	go func() { _ = proxy.Serve(lis) }()
	b.Cleanup(proxy.Stop)

	direct := runtimeapi.NewImageServiceClient(dial(cd.CRIEndpoint))
	proxied := runtimeapi.NewImageServiceClient(dial("unix://" + sock))
	if _, err := direct.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		b.Fatal(err)
	}
	status := &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}}
	for _, c := range []struct {
		name   string
		client runtimeapi.ImageServiceClient
	}{{"direct", direct}, {"proxy", proxied}} {
		b.Run("ImageStatus/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.client.ImageStatus(ctx, status)
				if err != nil || resp.GetImage() == nil {
					b.Fatalf("ImageStatus(%s) = %v, %v", image, resp, err)
				}
			}
		})
		b.Run("ListImages/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.client.ListImages(ctx, &runtimeapi.ListImagesRequest{})
				if err != nil || len(resp.GetImages()) == 0 {
					b.Fatalf("ListImages = %v, %v", resp, err)
				}
			}
		})
	}
}

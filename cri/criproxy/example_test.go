package criproxy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri/criproxy"
	"github.com/pullrecords/pullrecords/cri/critest"
)

// onlyPublic admits pulls of public images only.
type onlyPublic struct{}

func (onlyPublic) GatePull(ctx context.Context, req *runtimeapi.PullImageRequest, pull func(context.Context) (*runtimeapi.PullImageResponse, error)) error {
	image := req.GetImage().GetImage()
	if strings.Contains(image, "/private/") {
		return status.Errorf(codes.PermissionDenied, "origin registry.example refused the credential for %q", image)
	}
	if _, err := pull(ctx); err != nil {
		return err
	}
	fmt.Println("pulled", image)
	return nil
}

// A shim serves the proxy where the kubelet expects its runtime, in front
// of the runtime's own socket.
func Example() {
	dir, _ := os.MkdirTemp("", "criproxy-example")
	defer os.RemoveAll(dir)
	runtimeSocket, shimSocket := filepath.Join(dir, "containerd.sock"), filepath.Join(dir, "shim.sock")

	// The real runtime (here a fake).
	fake, _ := critest.Listen(runtimeSocket, critest.NewImageService().Register)
	defer fake.Stop()
	runtimeConn, _ := grpc.NewClient("unix://"+runtimeSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer runtimeConn.Close()

	proxy := criproxy.New(runtimeConn, onlyPublic{})
	lis, _ := net.Listen("unix", shimSocket)
	go proxy.Serve(lis)
	defer proxy.Stop()

	// The kubelet's side.
	kubelet, _ := grpc.NewClient("unix://"+shimSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer kubelet.Close()
	images := runtimeapi.NewImageServiceClient(kubelet)
	for _, image := range []string{"registry.example/public/app:1", "registry.example/private/app:1"} {
		_, err := images.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
		if err != nil {
			fmt.Println(status.Code(err), status.Convert(err).Message())
		}
	}
	v, _ := runtimeapi.NewRuntimeServiceClient(kubelet).Version(context.Background(), &runtimeapi.VersionRequest{})
	fmt.Println("runtime", v.GetRuntimeName())
	// Output:
	// pulled registry.example/public/app:1
	// PermissionDenied origin registry.example refused the credential for "registry.example/private/app:1"
	// runtime critest
}

package crishim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/crishim"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

var errDenied = errors.New("denied")

// origin accepts alice's credential for one repository and nothing else.
type origin struct{ calls int }

func (o *origin) Verify(_ context.Context, image string, auth *imageruntime.AuthConfig) (string, error) {
	o.calls++
	if auth != nil && auth.Username == "alice" && image == "registry.example.com/team/app:v1" {
		return "sha256:" + fmt.Sprintf("%064d", 1), nil
	}
	return "", fmt.Errorf("%w: registry.example.com answered 401", errDenied)
}

type noImages struct{}

func (noImages) ListImages(context.Context) ([]imageruntime.Image, error) { return nil, nil }

// A shim's flow: turn the CRI request into a Request, ask the gate, forward
// the pull only when admitted, then record the runtime's imageRef.
func Example() {
	ctx := klog.NewContext(context.Background(), logr.Discard())
	stateDir, _ := os.MkdirTemp("", "shim")
	defer os.RemoveAll(stateDir)

	disk, err := fsstore.New(logr.Discard(), stateDir) // records in stateDir/image_manager
	if err != nil {
		panic(err)
	}
	defer disk.Close()
	cache, _ := memstore.NewCache(logr.Discard(), disk)
	policy, _ := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	manager, _ := pullmanager.NewImagePullManager(ctx, cache, policy, noImages{})
	stamps, err := credstamp.Open(logr.Discard(), filepath.Join(stateDir, "verified"))
	if err != nil {
		panic(err)
	}
	local := map[string]string{}
	o := &origin{}
	gate, err := crishim.NewGate(crishim.Config{
		Records:  manager,
		Stamps:   stamps,
		Verifier: o,
		TTL:      time.Hour,
		Local:    func(_ context.Context, image string) (string, bool) { d, ok := local[image]; return d, ok },
		Classify: crishim.ClassifyBySentinels(errDenied, nil, nil, nil, nil),
	})
	if err != nil {
		panic(err)
	}

	pull := func(user, namespace string) {
		req := crishim.RequestFromCRI(&runtimeapi.PullImageRequest{
			Image:         &runtimeapi.ImageSpec{Image: "registry.example.com/team/app:v1"},
			Auth:          &runtimeapi.AuthConfig{Username: user, Password: user + "-password"},
			SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Namespace: namespace, Name: "app", Uid: namespace + "-uid"}},
		})
		a, err := gate.Admit(ctx, req)
		if err != nil {
			fmt.Println("refused:", err)
			return
		}
		fmt.Printf("admitted: credential=%s remembered=%v\n", a.Credential, a.Remembered)
		// ... forward the pull to the runtime; it answers with an imageRef.
		local[req.Image] = a.Digest
		gate.PullSucceeded(ctx, req, a.Digest)
	}
	pull("alice", "tenant-a")
	pull("alice", "tenant-a")
	pull("mallory", "tenant-b")
	fmt.Println("origin requests:", o.calls)
	// Output:
	// admitted: credential=pod remembered=false
	// admitted: credential=pod remembered=true
	// refused: refusing to pull "registry.example.com/team/app:v1" for pod tenant-b/app: the check at the origin registry registry.example.com failed: denied: registry.example.com answered 401
	// origin requests: 2
}

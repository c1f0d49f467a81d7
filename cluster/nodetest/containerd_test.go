package nodetest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/cri"
)

// TestContainerdAlone starts a containerd without a kubelet, pulls an image
// from a local registry through CRI, restarts the containerd process and
// finds the image still there, then stops it and finds nothing left.
func TestContainerdAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestContainerdAlone starts containerd and must run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	reg, err := nodetest.StartRegistry(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	image := reg.Host + "/alone/app:v1"
	if _, err := nodetest.PushImage(ctx, reg, image, map[string]nodetest.File{"hello.txt": {Data: []byte("alone\n")}}, []string{"/hello.txt"}, nil); err != nil {
		t.Fatal(err)
	}

	cd, err := nodetest.StartContainerd(ctx, nodetest.ContainerdOptions{Name: "alone", InsecureRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cd.Stop)
	svc, err := cri.Dial(ctx, cd.CRIEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	ref, err := svc.PullImage(ctx, image, nil)
	if err != nil {
		t.Fatalf("PullImage: %v\n%s", err, tail(cd.Log(), 30))
	}

	if err := cd.StopDaemon(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ImageStatus(ctx, image); err == nil || !cri.IsTransient(err) {
		t.Errorf("ImageStatus with containerd stopped = %v, want a transient error", err)
	}
	if err := cd.StartDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cd.StartDaemon(ctx); err == nil {
		t.Error("StartDaemon of a running containerd succeeded")
	}
	// gRPC reconnects with a backoff: retry transient errors for a while.
	retryCtx, stopRetry := context.WithTimeout(ctx, 30*time.Second)
	defer stopRetry()
	img, err := svc.ImageStatus(retryCtx, image)
	for err != nil && cri.IsTransient(err) && retryCtx.Err() == nil {
		select {
		case <-retryCtx.Done():
		case <-time.After(100 * time.Millisecond):
			img, err = svc.ImageStatus(retryCtx, image)
		}
	}
	if err != nil || img == nil || img.ID != ref {
		t.Errorf("ImageStatus after the restart = %+v, %v; want %s", img, err, ref)
	}

	cd.Stop()
	cd.Stop() // idempotent
	if pids := pidsWithSubstring(cd.Dir); len(pids) > 0 {
		t.Errorf("processes %v still refer to %s after Stop", pids, cd.Dir)
	}
	if _, err := os.Stat(cd.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Stop (%v)", cd.Dir, err)
	}
	if err := cd.StartDaemon(ctx); err == nil {
		t.Error("StartDaemon after Stop succeeded")
	}
}

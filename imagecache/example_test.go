package imagecache_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/cri/critest"
	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// startRuntime starts a fake container runtime, critest's CRI image service
// served over gRPC on a unix socket, and dials it with the cri client: the
// *cri.ImageService a node's image cache and pull manager are given. stop
// closes the client and the server. Examples have no testing.T, so the
// socket is made with critest.Listen in a directory of their own.
func startRuntime() (fake *critest.ImageService, client *cri.ImageService, stop func()) {
	dir, err := os.MkdirTemp("", "critest")
	if err != nil {
		panic(err)
	}
	fake = critest.NewImageService()
	srv, err := critest.Listen(filepath.Join(dir, "cri.sock"), fake.Register)
	if err != nil {
		panic(err)
	}
	client, err = cri.Dial(context.Background(), srv.Endpoint())
	if err != nil {
		panic(err)
	}
	return fake, client, func() {
		_ = client.Close()
		srv.Stop()
		_ = os.RemoveAll(dir)
	}
}

func Example() {
	ctx := context.Background()
	// The pull records and the pull manager the kubelet's checks ask; the
	// in-memory store stands in for the kubelet's directory.
	records := memstore.New()
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	if err != nil {
		panic(err)
	}
	pulls, err := pullmanager.NewImagePullManager(ctx, records, policy, nil)
	if err != nil {
		panic(err)
	}

	_, runtime, stop := startRuntime() // the node's container runtime
	defer stop()

	done := make(chan imagecache.CacheStatus, 1)
	m, err := imagecache.New(klog.Background(), runtime, pulls,
		imagecache.WithWorkers(1),
		imagecache.WithStatusHandler(func(s imagecache.CacheStatus) { done <- s }),
	)
	if err != nil {
		panic(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = m.Run(runCtx); close(stopped) }()

	err = m.Apply(ctx, imagecache.ImageCache{
		Namespace: "tenant-a", Name: "warm",
		Images: []string{"registry.example/app:1", "registry.example/db:2"},
		PullSecret: &imagecache.PullSecret{Namespace: "tenant-a", Name: "regcred", UID: "1234",
			Username: "robot", Password: "not-printed"},
	})
	if err != nil {
		panic(err)
	}
	st := <-done
	fmt.Printf("%s %s: %d succeeded, complete=%t\n", st.ImageCache, st.WorkType, st.Counts[imagecache.StatusSucceeded], st.Complete)
	for _, r := range st.Results {
		fmt.Println(r.Request.Image, r.Status, r.Reason)
	}
	cancel()
	<-stopped

	// What the pull manager recorded: each image, under its image ID (shown
	// shortened), for the secret only.
	recs, _ := records.ListImagePulledRecords()
	slices.SortFunc(recs, func(a, b *accessor.ImagePulledRecord) int { return strings.Compare(a.ImageRef, b.ImageRef) })
	for _, r := range recs {
		for name, c := range r.CredentialMapping {
			fmt.Printf("recorded %s as %.19s, node-wide=%t secrets=%d\n", name, r.ImageRef, c.NodePodsAccessible, len(c.KubernetesSecrets))
		}
	}
	// Output:
	// tenant-a/warm create: 2 succeeded, complete=true
	// registry.example/app:1 succeeded Pulled
	// registry.example/db:2 succeeded Pulled
	// recorded registry.example/db as sha256:46a2f60766b5, node-wide=false secrets=1
	// recorded registry.example/app as sha256:ec7d0b60784c, node-wide=false secrets=1
}

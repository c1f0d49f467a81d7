package imagecache_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// memImages stands in for *cri.ImageService.
type memImages struct {
	mu     sync.Mutex
	images map[string]string
}

func (m *memImages) ImageStatus(_ context.Context, image string) (*pullmanager.Image, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.images[image]; ok {
		return &pullmanager.Image{ID: id}, nil
	}
	return nil, nil
}

func (m *memImages) PullImage(_ context.Context, image string, _ *pullmanager.AuthConfig) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := "sha256:" + fmt.Sprint(len(m.images)+1)
	m.images[image] = id
	return id, nil
}

func (m *memImages) RemoveImage(_ context.Context, image string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.images, image)
	return nil
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

	done := make(chan imagecache.CacheStatus, 1)
	m, err := imagecache.New(klog.Background(), &memImages{images: map[string]string{}}, pulls,
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

	// What the pull manager recorded: each image for the secret only.
	recs, _ := records.ListImagePulledRecords()
	slices.SortFunc(recs, func(a, b *accessor.ImagePulledRecord) int { return strings.Compare(a.ImageRef, b.ImageRef) })
	for _, r := range recs {
		for name, c := range r.CredentialMapping {
			fmt.Printf("recorded %s as %s, node-wide=%t secrets=%d\n", name, r.ImageRef, c.NodePodsAccessible, len(c.KubernetesSecrets))
		}
	}
	// Output:
	// tenant-a/warm create: 2 succeeded, complete=true
	// registry.example/app:1 succeeded Pulled
	// registry.example/db:2 succeeded Pulled
	// recorded registry.example/app as sha256:1, node-wide=false secrets=1
	// recorded registry.example/db as sha256:2, node-wide=false secrets=1
}

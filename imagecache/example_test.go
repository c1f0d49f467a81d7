package imagecache_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/imagecache"
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

// printingPulls stands in for the pull manager (use
// pullmanager.NewImagePullManager) and prints what gets recorded.
type printingPulls struct{}

func (printingPulls) RecordPullIntent(_ klog.Logger, image string) error { return nil }
func (printingPulls) RecordImagePulled(_ context.Context, image, ref string, c *accessor.ImagePullCredentials) {
	fmt.Printf("recorded %s as %s, node-wide=%t secrets=%d\n", image, ref, c.NodePodsAccessible, len(c.KubernetesSecrets))
}
func (printingPulls) RecordImagePullFailed(context.Context, string) {}
func (printingPulls) MustAttemptImagePull(context.Context, string, string, pullmanager.GetPodCredentials) (bool, error) {
	return true, nil
}
func (printingPulls) PruneUnknownRecords(context.Context, []string, time.Time) {}

func Example() {
	done := make(chan imagecache.CacheStatus, 1)
	m, err := imagecache.New(klog.Background(), &memImages{images: map[string]string{}}, printingPulls{},
		imagecache.WithWorkers(1),
		imagecache.WithStatusHandler(func(s imagecache.CacheStatus) { done <- s }),
	)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = m.Run(ctx); close(stopped) }()

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
	// Output:
	// recorded registry.example/app:1 as sha256:1, node-wide=false secrets=1
	// recorded registry.example/db:2 as sha256:2, node-wide=false secrets=1
	// tenant-a/warm create: 2 succeeded, complete=true
	// registry.example/app:1 succeeded Pulled
	// registry.example/db:2 succeeded Pulled
}

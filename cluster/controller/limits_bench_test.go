package controller

import (
	"context"
	"fmt"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// benchSync builds a controller over fake clients whose informer stores
// hold nodes Nodes and one ImageCache of images images in the middle of
// its create action, without running it: each syncCache call then does the
// same work, which the benchmark measures (allocations with -benchmem).
func benchSync(b *testing.B, nodes, images int) (*Controller, string) {
	b.Helper()
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	b.Cleanup(func() { klog.LogToStderr(true) })
	now := fakeNow
	c, _, dyn := fakeController(b, now)
	nodeStore := c.kubeInformers.Core().V1().Nodes().Informer().GetStore()
	for i := 0; i < nodes; i++ {
		if err := nodeStore.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%04d", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	var imgs []string
	for i := 0; i < images; i++ {
		imgs = append(imgs, fmt.Sprintf("registry.test/public/app%05d:1", i))
	}
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "big", UID: "u1", Generation: 1},
		Spec: api.ImageCacheSpec{CacheSpec: []api.CacheSpecImages{{Images: imgs}}},
		Status: api.ImageCacheStatus{Status: api.ActionStatusProcessing, Reason: api.ReasonImageCacheCreate, Batch: "1-x",
			ObservedGeneration: 1, StartTime: &metav1.Time{Time: now}}}
	u, err := api.ToUnstructured(ic)
	if err != nil {
		b.Fatal(err)
	}
	u.SetAPIVersion(api.ImageCacheKind.GroupVersion().String())
	u.SetKind(api.ImageCacheKind.Kind)
	if _, err := dyn.Resource(api.ImageCacheResource).Namespace("t").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := c.dynInformers.ForResource(api.ImageCacheResource).Informer().GetStore().Add(u); err != nil {
		b.Fatal(err)
	}
	return c, "t/big"
}

// addCaches adds n more caches of 5 images each, from n namespaces, each
// selecting one of 10 node pools, already worked on: the node bound then
// has to be shared, so the sync decides each node's admission.
func addCaches(b *testing.B, c *Controller, n int) {
	b.Helper()
	store := c.dynInformers.ForResource(api.ImageCacheResource).Informer().GetStore()
	for i := 0; i < n; i++ {
		ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("o%03d", i), Name: "c", UID: "o", Generation: 1},
			Spec: api.ImageCacheSpec{CacheSpec: []api.CacheSpecImages{{Images: []string{"registry.test/a:1", "registry.test/b:1", "registry.test/c:1",
				"registry.test/d:1", fmt.Sprintf("registry.test/own%03d:1", i)}, NodeSelector: map[string]string{"pool": fmt.Sprint(i % 10)}}}},
			Status: api.ImageCacheStatus{Status: api.ActionStatusSucceeded, Reason: api.ReasonImageCacheCreate, Batch: "1-y", ObservedGeneration: 1}}
		u, err := api.ToUnstructured(ic)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Add(u); err != nil {
			b.Fatal(err)
		}
	}
	nodeStore := c.kubeInformers.Core().V1().Nodes().Informer().GetStore()
	for _, o := range nodeStore.List() {
		n := o.(*corev1.Node).DeepCopy()
		n.Labels = map[string]string{"pool": n.Name[len(n.Name)-1:]}
		if err := nodeStore.Update(n); err != nil {
			b.Fatal(err)
		}
	}
}

func runSync(b *testing.B, nodes, images int, others ...int) {
	c, key := benchSync(b, nodes, images)
	if len(others) > 0 {
		addCaches(b, c, others[0])
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.syncCache(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nodes*images), "pairs")
}

// A cache of 5,000 images (the issue's) over 500 nodes: refused at once.
func BenchmarkSyncCache500Nodes5000Images(b *testing.B) { runSync(b, 500, 5000) }

// A cache at the node bound over 500 nodes: every pair is decided.
func BenchmarkSyncCache500Nodes360Images(b *testing.B) { runSync(b, 500, DefaultMaxCacheImagesPerNode) }

// The cache over 100 nodes (for the code before the bounds, which
// builds every pair).
func BenchmarkSyncCache100Nodes5000Images(b *testing.B) { runSync(b, 100, 5000) }

// A 10-image cache over 500 nodes among 100 tenants' caches (500 entries
// in all, over the node bound in sum, though no node is full): each node's
// admission is decided.
func BenchmarkSyncCache500Nodes10ImagesAmong100Caches(b *testing.B) { runSync(b, 500, 10, 100) }

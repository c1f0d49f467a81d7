package controller_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// objectBytes is the size of the node's NodeImages as the API server
// stores it (JSON, with managedFields).
func (e *env) objectBytes(node string) int {
	e.t.Helper()
	u, err := e.dyn.Resource(api.NodeImagesResource).Get(e.ctx, node, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	data, err := u.MarshalJSON()
	if err != nil {
		e.t.Fatal(err)
	}
	return len(data)
}

// TestMeasureNodeImagesBytes measures what one (cache, image) pair costs
// in a node's NodeImages as the controller and the agent write it (spec
// entry with the cache's pull record, presence, result, and the managed
// fields of each), for short and long names, and checks that the size
// model the node bound is derived from (limits.go) covers it.
func TestMeasureNodeImagesBytes(t *testing.T) {
	e := newEnv(t)
	e.startController(controller.Config{MaxInFlightPerNode: 50, MaxCacheImagesPerNode: 1000})
	for i, c := range []struct{ cache, image string }{
		{"measure", "registry.test/public/team/service-%03d:v1.2.3"},
		{"measure-with-a-longer-cache-name-xxxxxxxxxxxx", "registry.test/public/team/a-much-longer-repository-path/with-several-components/and-a-long-service-name-%03d:v1.2.3-abcdef01"},
	} {
		n := e.addNode(fmt.Sprintf("n%d", i), true)
		e.startRuntime(n)
		tn := e.tenant(fmt.Sprintf("m%d", i))
		empty := e.objectBytes(n)
		const count = 100
		var imgs []string
		for k := 0; k < count; k++ {
			imgs = append(imgs, fmt.Sprintf(c.image, k))
		}
		// Only this node: the test's label selects both, so restrict by name.
		tn.applyCacheOn(c.cache, n, imgs...)
		if ic := tn.waitDone(c.cache, api.ReasonImageCacheCreate); ic.Status.Status != api.ActionStatusSucceeded {
			t.Fatalf("%s: %+v", c.cache, ic.Status)
		}
		e.waitFor("the agent's report of every image", func() bool {
			ni := e.nodeImages(n)
			return ni != nil && len(ni.Status.Images) == count && len(ni.Status.Results) == count
		})
		per := (e.objectBytes(n) - empty) / count
		key := len(tn.ns + "/" + c.cache)
		model := controller.PairBytes(len(imgs[0]), key)
		t.Logf("image %d bytes, cache key %d bytes: %d bytes per pair measured (succeeded, with a pull record), %d modelled (a failed result's full message included)",
			len(imgs[0]), key, per, model)
		if per > model {
			t.Errorf("measured %d bytes per pair, over the model's %d: the node bound no longer bounds the object", per, model)
		}
	}
}

// applyCacheYAML creates or replaces the tenant's ImageCache from the YAML
// of its spec, as kubectl apply would, and returns the API server's error.
func (tn *tenant) applyCacheYAML(name, specYAML string, dryRun bool) error {
	tn.e.t.Helper()
	doc := fmt.Sprintf("apiVersion: kubefledged.io/v1alpha2\nkind: ImageCache\nmetadata:\n  name: %s\n  namespace: %s\n%s", name, tn.ns, specYAML)
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		tn.e.t.Fatalf("bad test YAML: %v\n%s", err, doc)
	}
	opts := metav1.PatchOptions{FieldManager: "kubectl", Force: ptr.To(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = tn.dyn.Resource(api.ImageCacheResource).Namespace(tn.ns).Patch(tn.e.ctx, name, "application/apply-patch+yaml", data, opts)
	return err
}

// applyCacheOn is applyCache for the one node named.
func (tn *tenant) applyCacheOn(name, node string, images ...string) {
	tn.e.t.Helper()
	spec := fmt.Sprintf("spec:\n  cacheSpec:\n  - images: [%s]\n    nodeSelector: {kubernetes.io/hostname: %q}\n", strings.Join(images, ", "), node)
	if err := tn.applyCacheYAML(name, spec, false); err != nil {
		tn.e.t.Fatalf("tenant %s applying ImageCache %s: %v", tn.ns, name, err)
	}
}

// entries counts the (cache, image) pairs a NodeImages holds: in its
// spec's wanted images, and in its results.
func entries(ni *api.NodeImages) (spec, results int) {
	if ni == nil {
		return 0, 0
	}
	for _, img := range ni.Spec.Images {
		spec += len(img.Caches)
	}
	return spec, len(ni.Status.Results)
}

// watchEntries samples the node's object until the test ends and fails the
// test if it ever holds more than bound pairs.
func (e *env) watchEntries(node string, bound int) {
	var (
		stop = make(chan struct{})
		done = make(chan struct{})
		mu   sync.Mutex
		max  [2]int
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			u, err := e.dyn.Resource(api.NodeImagesResource).Get(e.ctx, node, metav1.GetOptions{})
			if err != nil {
				continue
			}
			var ni api.NodeImages
			if api.FromUnstructured(u, &ni) != nil {
				continue
			}
			s, r := entries(&ni)
			mu.Lock()
			max[0], max[1] = maxInt(max[0], s), maxInt(max[1], r)
			mu.Unlock()
		}
	}()
	e.t.Cleanup(func() {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		e.t.Logf("node %s held at most %d wanted pairs and %d results (bound %d)", node, max[0], max[1], bound)
		if max[0] > bound || max[1] > bound {
			e.t.Errorf("node %s held %d wanted pairs and %d results, over the bound %d", node, max[0], max[1], bound)
		}
	})
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func imageList(prefix string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("registry.test/public/%s-%02d:1", prefix, i))
	}
	return out
}

// Tenant A fills a node up to its bound (a cache at MaxImagesPerCache and
// more); tenant B's small cache still converges there as usual, and what
// is cut is A's newest cache, refused with a status of its own; a cache
// one image over MaxImagesPerCache is refused at once; B is untouched by
// either, and the node's object never holds more than the bound. No
// refused (node, image) is ever answered as pulled or present.
func TestTenantNodeBoundIsFair(t *testing.T) {
	const perCache, perNode = 10, 25
	e := newEnv(t)
	n := e.addNode("n", true)
	e.watchEntries(n, perNode)
	e.startController(controller.Config{MaxImagesPerCache: perCache, MaxCacheImagesPerNode: perNode, MaxInFlightPerNode: 10})
	a, b := e.tenant("a"), e.tenant("b")

	a.applyCache("a1", false, imageList("a1", perCache)...)
	a.waitDone("a1", api.ReasonImageCacheCreate)
	a.applyCache("a2", false, imageList("a2", 10)...)
	a.waitDone("a2", api.ReasonImageCacheCreate)
	a.applyCache("a3", false, imageList("a3", 5)...)
	for _, name := range []string{"a1", "a2", "a3"} {
		if ic := a.waitDone(name, api.ReasonImageCacheCreate); ic.Status.Status != api.ActionStatusSucceeded {
			t.Fatalf("%s, under the bound: %+v", name, ic.Status)
		}
	}
	if s, _ := entries(e.nodeImages(n)); s != perNode {
		t.Fatalf("node holds %d pairs, want A's %d", s, perNode)
	}

	// B's 4 images are within its fair share (25/2): admitted whole. A's
	// share is 21: a1 and a2 (older) stay, a3 goes.
	b.applyCache("b1", false, imageList("b1", 4)...)
	ib := b.waitDone("b1", api.ReasonImageCacheCreate)
	if ib.Status.Status != api.ActionStatusSucceeded || ib.Status.Counts.Succeeded != 4 || len(b.results(n, ib)) != 4 {
		t.Fatalf("b1: %+v %+v, results %v", ib.Status, ib.Status.Counts, b.results(n, ib))
	}
	e.waitFor("a3 dropped from the node's spec and results", func() bool {
		ni := e.nodeImages(n)
		for _, img := range ni.Spec.Images {
			for _, c := range img.Caches {
				if c == a.ns+"/a3" {
					return false
				}
			}
		}
		for _, r := range ni.Status.Results {
			if r.Cache == a.ns+"/a3" {
				return false
			}
		}
		return true
	})
	// Every pre-pull pod of a3 from here on would be a pull for a refused
	// cache.
	w, err := e.admin.CoreV1().Pods(a.ns).Watch(e.ctx, metav1.ListOptions{LabelSelector: "pullrecords.io/cache-uid=" + string(a.cache("a3").UID)})
	if err != nil {
		t.Fatal(err)
	}
	a.refresh("a3")
	ic := a.waitDone("a3", api.ReasonImageCacheRefresh)
	w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added {
			t.Errorf("pre-pull pod for refused a3: %v", ev.Object)
		}
	}
	if ic.Status.Status != api.ActionStatusFailed || ic.Status.Counts.Failed != 5 || ic.Status.Counts.Succeeded+ic.Status.Counts.AlreadyPulled != 0 {
		t.Fatalf("a3 after B came: %+v %+v, want 5 failed", ic.Status, ic.Status.Counts)
	}
	if !strings.Contains(ic.Status.Message, "limit of 25 per node") || !strings.Contains(ic.Status.Message, "1 node(s) refused") ||
		!strings.Contains(ic.Status.Message, "--max-cache-images-per-node") {
		t.Errorf("a3's message does not name the limit, the nodes and the fix: %q", ic.Status.Message)
	}
	for img, fs := range ic.Status.Failures {
		if len(fs) != 1 || fs[0].Reason != controller.ReasonNodeImageLimit {
			t.Errorf("a3 failure for %s: %+v", img, fs)
		}
	}
	for _, name := range []string{"a1", "a2"} {
		if got := a.results(n, a.cache(name)); len(got) != 10 {
			t.Errorf("%s lost results on the node: %d", name, len(got))
		}
	}

	// One over the per-cache bound: refused at once, nothing on the node.
	a.applyCache("a4", false, imageList("a4", perCache+1)...)
	ic = a.waitDone("a4", controller.ReasonCacheTooLarge)
	if ic.Status.Status != api.ActionStatusFailed || !strings.Contains(ic.Status.Message, "11 distinct images") ||
		!strings.Contains(ic.Status.Message, "--max-images-per-cache") || ic.Status.Counts == nil || ic.Status.Counts.Desired != 0 {
		t.Fatalf("a4: %+v", ic.Status)
	}
	ni := e.nodeImages(n)
	for _, img := range ni.Spec.Images {
		if strings.Contains(img.Image, "/a4-") {
			t.Errorf("a4's image %s written to the node", img.Image)
		}
	}
	ib2 := b.cache("b1")
	if ib2.Status.Batch != ib.Status.Batch || ib2.Status.Status != api.ActionStatusSucceeded || len(b.results(n, ib2)) != 4 {
		t.Errorf("b1 changed: %+v, %d results", ib2.Status, len(b.results(n, ib2)))
	}
}

// refresh asks for a refresh of the tenant's cache, as kube-fledged's users
// do (the refresh annotation).
func (tn *tenant) refresh(name string) {
	tn.e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, api.RefreshAnnotation)
	if _, err := tn.dyn.Resource(api.ImageCacheResource).Namespace(tn.ns).Patch(tn.e.ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		tn.e.t.Fatal(err)
	}
}

// A tenant updating its cache again and again to new images does not pile
// up results on the node: only the images the cache lists keep theirs.
func TestTenantUpdatesDoNotPileUpResults(t *testing.T) {
	e := newEnv(t)
	n := e.addNode("n", true)
	e.startController(controller.Config{MaxInFlightPerNode: 10})
	a := e.tenant("a")
	for round := 0; round < 4; round++ {
		a.applyCache("churn", false, imageList(fmt.Sprintf("churn%d", round), 5)...)
		reason := api.ReasonImageCacheCreate
		if round > 0 {
			reason = api.ReasonImageCacheUpdate
		}
		if ic := a.waitDone("churn", reason); ic.Status.Status != api.ActionStatusSucceeded {
			t.Fatalf("round %d: %+v", round, ic.Status)
		}
	}
	e.waitFor("only the current images' results on the node", func() bool {
		_, r := entries(e.nodeImages(n))
		return r == 5
	})
	for _, r := range e.nodeImages(n).Status.Results {
		if !strings.Contains(r.Image, "/churn3-") {
			t.Errorf("result of a dropped image kept: %+v", r)
		}
	}
}

package controller

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func dem(ns, name string, age, weight int) demand {
	return demand{key: ns + "/" + name, namespace: ns, name: name, created: t0.Add(time.Duration(age) * time.Minute), weight: weight}
}

func admittedKeys(a admission) []string {
	var out []string
	for k := range a.admitted {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The defaults keep a node's object under the budget at standard lengths,
// and the budget is well under 1 MiB.
func TestDefaultNodeBoundFitsBudget(t *testing.T) {
	if got := DefaultMaxCacheImagesPerNode * standardPairBytes; got > nodeImagesBudget || nodeImagesBudget > 1<<20*8/10 {
		t.Fatalf("%d entries x %d bytes = %d, budget %d (1 MiB = %d)", DefaultMaxCacheImagesPerNode, standardPairBytes, got, nodeImagesBudget, 1<<20)
	}
	if pairWeight(strings.Repeat("i", standardImageLen), strings.Repeat("k", standardCacheKeyLen)) != 1 {
		t.Fatal("a pair at standard lengths must count as one entry")
	}
	// The longest image reference the kubelet accepts (name 255, tag 128,
	// digest 71) counts as more than one, in proportion to its bytes.
	long := strings.Repeat("i", 255+1+128+1+71)
	w := pairWeight(long, strings.Repeat("k", 63+1+253))
	if w < 2 || w*standardPairBytes < pairBytes(len(long), 63+1+253) {
		t.Fatalf("weight %d of the longest pair does not cover its %d bytes", w, pairBytes(len(long), 317))
	}
}

func TestAdmitAllWhenUnderBound(t *testing.T) {
	a := admit([]demand{dem("a", "x", 0, 50), dem("b", "y", 1, 50)}, 100)
	if got := admittedKeys(a); fmt.Sprint(got) != "[a/x b/y]" || len(a.refused) != 0 {
		t.Fatalf("admitted %v refused %v", got, a.refused)
	}
}

// Tenant A fills the node; tenant B's small cache, created later, is still
// admitted whole, and A's newest cache is the one cut.
func TestAdmitSmallTenantNotPushedOut(t *testing.T) {
	ds := []demand{dem("a", "big", 0, 60), dem("a", "more", 1, 40), dem("b", "small", 5, 10)}
	a := admit(ds, 100)
	if !a.admitted["b/small"] || !a.admitted["a/big"] {
		t.Fatalf("admitted %v", admittedKeys(a))
	}
	r, ok := a.refused["a/more"]
	if !ok {
		t.Fatalf("a/more not refused: %v", admittedKeys(a))
	}
	if r.share != 90 || r.nsDemand != 100 || r.total != 110 || r.bound != 100 || r.namespaces != 2 || r.weight != 40 {
		t.Fatalf("refusal %+v", r)
	}
	if msg := r.summary(3); !strings.Contains(msg, "3 node(s)") || !strings.Contains(msg, "limit of 100 per node") || !strings.Contains(msg, "--max-cache-images-per-node") {
		t.Fatalf("message %q", msg)
	}
}

// Within a namespace the oldest caches go first; a younger one that still
// fits is admitted too.
func TestAdmitOldestFirstWithinNamespace(t *testing.T) {
	ds := []demand{dem("a", "young", 9, 30), dem("a", "old", 1, 40), dem("a", "mid", 5, 40), dem("b", "x", 0, 50)}
	a := admit(ds, 100) // fair share 50 each
	if !a.admitted["a/old"] || a.admitted["a/mid"] || a.admitted["a/young"] || !a.admitted["b/x"] {
		t.Fatalf("admitted %v", admittedKeys(a))
	}
	ds = []demand{dem("a", "young", 9, 10), dem("a", "old", 1, 40), dem("a", "mid", 5, 40), dem("b", "x", 0, 50)}
	if a := admit(ds, 100); !a.admitted["a/young"] || a.admitted["a/mid"] {
		t.Fatalf("admitted %v, want old and young of a", admittedKeys(a))
	}
	// Same creation time: by name.
	ds = []demand{dem("a", "b", 0, 60), dem("a", "a", 0, 60)}
	if a := admit(ds, 100); !a.admitted["a/a"] || a.admitted["a/b"] {
		t.Fatalf("admitted %v", admittedKeys(a))
	}
}

// The biggest demands are cut first: small namespaces keep everything, the
// rest shares what is left equally.
func TestAdmitWaterFilling(t *testing.T) {
	ds := []demand{dem("s1", "c", 0, 10), dem("s2", "c", 0, 20)}
	for i := 0; i < 10; i++ {
		ds = append(ds, dem("big", fmt.Sprintf("c%02d", i), i, 10))
	}
	ds = append(ds, dem("mid", "c1", 0, 30), dem("mid", "c2", 1, 30))
	a := admit(ds, 100) // s1 10, s2 20, then 70 for mid (60) and big (100): 35 each
	for _, k := range []string{"s1/c", "s2/c", "mid/c1", "big/c00", "big/c01", "big/c02"} {
		if !a.admitted[k] {
			t.Errorf("%s refused: %+v", k, a.refused[k])
		}
	}
	if a.admitted["mid/c2"] || a.admitted["big/c03"] {
		t.Errorf("admitted %v", admittedKeys(a))
	}
}

// Random demands: the admitted sum never exceeds the bound, every namespace
// wanting at most bound/namespaces is admitted whole, and the order of the
// demands changes nothing.
func TestAdmitProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 2000; round++ {
		bound := 1 + rng.Intn(400)
		var ds []demand
		nss := 1 + rng.Intn(6)
		for i := 0; i < 1+rng.Intn(12); i++ {
			ds = append(ds, dem(fmt.Sprintf("ns%d", rng.Intn(nss)), fmt.Sprintf("c%d", i), rng.Intn(5), 1+rng.Intn(bound)))
		}
		a := admit(ds, bound)
		sum, nsDemand := 0, map[string]int{}
		for _, d := range ds {
			nsDemand[d.namespace] += d.weight
			if a.admitted[d.key] {
				sum += d.weight
			} else if _, ok := a.refused[d.key]; !ok {
				t.Fatalf("round %d: %s neither admitted nor refused", round, d.key)
			}
		}
		if sum > bound {
			t.Fatalf("round %d: admitted %d > bound %d", round, sum, bound)
		}
		for _, d := range ds {
			if nsDemand[d.namespace] <= bound/len(nsDemand) && !a.admitted[d.key] {
				t.Fatalf("round %d: %s of a namespace wanting %d <= %d/%d refused", round, d.key, nsDemand[d.namespace], bound, len(nsDemand))
			}
		}
		rng.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		if b := admit(ds, bound); fmt.Sprint(admittedKeys(b)) != fmt.Sprint(admittedKeys(a)) {
			t.Fatalf("round %d: order changed the admission: %v vs %v", round, admittedKeys(b), admittedKeys(a))
		}
	}
}

func cacheOf(ns, name string, batch string, entries ...api.CacheSpecImages) *api.ImageCache {
	return &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0)},
		Spec: api.ImageCacheSpec{CacheSpec: entries}, Status: api.ImageCacheStatus{Batch: batch}}
}

func imagesN(prefix string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("r.test/%s%d:1", prefix, i))
	}
	return out
}

// nodeDemands counts what imagesFor puts on the node, skips caches without
// an action or over the per-cache bound, and counts purging caches (their
// results take room).
func TestNodeDemands(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "a"}}}
	dup := append(imagesN("x", 3), "r.test/x0:1", " r.test/x1:1 ")
	caches := []*api.ImageCache{
		cacheOf("t1", "sel", "b", api.CacheSpecImages{Images: imagesN("a", 5), NodeSelector: map[string]string{"pool": "a"}},
			api.CacheSpecImages{Images: imagesN("b", 7), NodeSelector: map[string]string{"pool": "b"}}),
		cacheOf("t1", "dup", "b", api.CacheSpecImages{Images: dup}),
		cacheOf("t2", "new", "", api.CacheSpecImages{Images: imagesN("c", 2)}),
		cacheOf("t2", "huge", "b", api.CacheSpecImages{Images: imagesN("d", 13)}),
	}
	purging := cacheOf("t3", "purging", "b", api.CacheSpecImages{Images: imagesN("e", 4)})
	purging.Status.Reason = api.ReasonImageCachePurge
	caches = append(caches, purging)
	got := map[string]int{}
	memo := newDemandMemo()
	for _, d := range nodeDemands(caches, node, 12, memo) {
		got[d.key] = d.weight
	}
	if fmt.Sprint(got) != "map[t1/dup:3 t1/sel:5 t3/purging:4]" {
		t.Fatalf("demands %v", got)
	}
	// The memo answers by the entries that select the node: a node of the
	// other pool gets the other entry's images, and the same pool again
	// the same weight.
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m", Labels: map[string]string{"pool": "b"}}}
	again := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "o", Labels: map[string]string{"pool": "a"}}}
	if w, v := memo.weight(caches[0], other), memo.weight(caches[0], again); w != 7 || v != 5 {
		t.Fatalf("weights %d (pool b), %d (pool a again), want 7, 5", w, v)
	}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if w := memo.weight(caches[0], bare); w != 0 {
		t.Fatalf("weight on a node no entry selects: %d", w)
	}
	if n := distinctImages(caches[0]); n != 12 {
		t.Fatalf("distinctImages = %d, want 12", n)
	}
	if n := distinctImages(caches[1]); n != 3 {
		t.Fatalf("distinctImages of dup = %d, want 3", n)
	}
}

func TestTruncateMessage(t *testing.T) {
	if got := truncateMessage("short", 10); got != "short" {
		t.Fatal(got)
	}
	s := strings.Repeat("é", 400) // 800 bytes
	got := truncateMessage(s, maxResultMessage)
	if len(got) > maxResultMessage || !strings.HasSuffix(got, "…") || !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
		t.Fatalf("%d bytes: %q", len(got), got)
	}
	if msg := tooLargeMessage(1001, 1000); !strings.Contains(msg, "1001") || !strings.Contains(msg, "--max-images-per-cache") {
		t.Fatal(msg)
	}
}

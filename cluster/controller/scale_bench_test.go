package controller_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// benchQPS is the controller's client-side limit in the benchmark: the
// command's default (--kube-api-qps).
var benchQPS float32 = 200

// countingTransport counts the controller's API requests by verb.
type countingTransport struct {
	next  http.RoundTripper
	mu    sync.Mutex
	verbs map[string]int
	total atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	watch := strings.Contains(r.URL.RawQuery, "watch=true")
	if !watch {
		c.total.Add(1)
		c.mu.Lock()
		c.verbs[r.Method]++
		c.mu.Unlock()
	}
	return c.next.RoundTrip(r)
}

// BenchmarkScale500Nodes10Images: one ImageCache of 10 images over 500
// simulated nodes (Node objects; the stand-in kubelet marks each pre-pull
// pod succeeded as the node's kubelet would), against the real API server
// and etcd, with the controller under its own RBAC identity and the
// command's default client limits (200 QPS, burst 400) and in-flight
// limits. Reported: seconds until the cache is Succeeded with all 5,000
// results, the controller's API requests per (node, image), and the test
// process's heap after the run (controller plus stand-in).
func BenchmarkScale500Nodes10Images(b *testing.B) { benchScale(b, nil) }

// BenchmarkScale500Nodes10ImagesBesideFullCache is the same, while another
// tenant's cache at the per-cache limit (1,000 images, the controller's
// default --max-images-per-cache) selects the same 500 nodes. Each node
// refuses it (over the 360 entries a node holds), so it fails there with
// NodeImageLimit before the clock starts, and stays: every sync of the
// measured cache's round admits the caches of each node again.
func BenchmarkScale500Nodes10ImagesBesideFullCache(b *testing.B) {
	benchScale(b, func(e *env) {
		ns := e.ns + "-full"
		if _, err := e.admin.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		var imgs []string
		for k := 0; k < 1000; k++ {
			imgs = append(imgs, fmt.Sprintf("registry.test/other/app%d:1", k))
		}
		e.applyCacheIn(ns, "full", fmt.Sprintf("  cacheSpec:\n  - images: [%s]\n    nodeSelector: {%s: \"yes\"}\n", strings.Join(imgs, ", "), e.label))
		e.waitFor("the full cache refused on every node", func() bool {
			u, err := e.dyn.Resource(api.ImageCacheResource).Namespace(ns).Get(e.ctx, "full", metav1.GetOptions{})
			if err != nil {
				return false
			}
			var ic api.ImageCache
			if api.FromUnstructured(u, &ic) != nil || ic.Status.Status != api.ActionStatusFailed || ic.Status.Counts == nil {
				return false
			}
			return ic.Status.Counts.Desired > 0 && ic.Status.Counts.Failed == ic.Status.Counts.Desired
		})
	})
}

// benchScale runs the scale benchmark; beside, when set, puts other work
// on the cluster after the controller started and before the clock.
func benchScale(b *testing.B, beside func(e *env)) {
	nodes, images := 500, 10
	// The controller's log would interleave with the benchmark's result
	// lines; the progress lines (b.Logf) say what happens.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	defer klog.LogToStderr(true)
	if n := os.Getenv("PULLRECORDS_BENCH_NODES"); n != "" {
		nodes, _ = strconv.Atoi(n)
	}
	for i := 0; i < b.N; i++ {
		func() {
			e := newBenchEnv(b, fmt.Sprintf("scale%d", i))
			for n := 0; n < nodes; n++ {
				e.addNode(fmt.Sprintf("n%03d", n), true)
			}
			counter := &countingTransport{verbs: map[string]int{}}
			cfg := rest.CopyConfig(e.ctlCfg)
			cfg.QPS, cfg.Burst = benchQPS, 2*int(benchQPS)
			cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
			c, err := controller.New(controller.Config{Kube: kubernetes.NewForConfigOrDie(controller.Protobuf(cfg)), Dynamic: dynamic.NewForConfigOrDie(cfg),
				NoopImage: "registry.test/pullrecords:test", RefreshInterval: -1, PullDeadline: 10 * time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(e.ctx)
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() { cancel(); <-done }()
			var imgs []string
			for k := 0; k < images; k++ {
				imgs = append(imgs, fmt.Sprintf("registry.test/public/app%d:1", k))
			}
			time.Sleep(time.Second) // informers synced before the clock starts
			if beside != nil {
				beside(e)
			}
			before := counter.total.Load()
			start := time.Now()
			e.applyCache("big", fmt.Sprintf("  cacheSpec:\n  - images: [%s]\n    nodeSelector: {%s: \"yes\"}\n", strings.Join(imgs, ", "), e.label))
			stopProgress := make(chan struct{})
			go func() {
				for {
					select {
					case <-stopProgress:
						return
					case <-time.After(5 * time.Second):
					}
					if c := e.cache("big").Status.Counts; c != nil {
						b.Logf("%5.1fs: %d/%d done, %d in flight, %d requests", time.Since(start).Seconds(),
							c.Succeeded+c.AlreadyPulled+c.Failed, c.Desired, c.InFlight, counter.total.Load()-before)
					}
				}
			}()
			ic := e.waitDone("big", api.ReasonImageCacheCreate)
			close(stopProgress)
			elapsed := time.Since(start)
			if ic.Status.Status != api.ActionStatusSucceeded || int(ic.Status.Counts.Succeeded) != nodes*images {
				b.Fatalf("status %+v counts %+v", ic.Status.Status, ic.Status.Counts)
			}
			e.waitFor("every pre-pull pod deleted", func() bool { return len(e.managedPods()) == 0 })
			requests := counter.total.Load() - before
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(elapsed.Seconds(), "s-to-converge")
			b.ReportMetric(float64(requests)/float64(nodes*images), "requests/pair")
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
			counter.mu.Lock()
			b.Logf("%d requests by verb %v; %d stand-in status writes", requests, counter.verbs, e.kubelet.Written.Load())
			counter.mu.Unlock()
		}()
	}
	b.StopTimer()
}

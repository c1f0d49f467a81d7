//go:build clustere2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/nodetest"
)

// quotaNode is the node of quotaStep, the one kubelet here that makes pod
// cgroups (the others run with cgroupsPerQOS off, which creates none, so
// pod-level limits would bind nothing there).
const quotaNode = "node-q"

// quotaCgroupRoot is quotaNode's kubelet --cgroup-root (cgroup v1,
// cgroupfs): its pods' cgroups are under <controller>/<root>/kubepods.
const quotaCgroupRoot = "pullrecords-" + quotaNode

// The pre-pull pod's pod-level resources (cluster/controller/pods.go): what
// quota admission charges each pod.
var quotaCharge = corev1.ResourceList{
	corev1.ResourceLimitsCPU: resource.MustParse("100m"), corev1.ResourceLimitsMemory: resource.MustParse("128Mi"),
	corev1.ResourceRequestsCPU: resource.MustParse("64m"), corev1.ResourceRequestsMemory: resource.MustParse("64Mi"),
	corev1.ResourcePods: resource.MustParse("1"),
}

// quotaStep: issue 19 on a real kubelet. A namespace whose ResourceQuota
// admits exactly one pre-pull pod's pod-level resources (and would refuse
// one pod of containers limited one by one: 10 images x 50m) caches
// 10 private images on a node of its own whose kubelet makes pod
// cgroups; the cache succeeds, the images are there, the quota charged one
// pod's pod-level values, the pod's cgroup is limited to them and nothing
// was OOM-killed. Then a refresh, every image present: the containers all
// start within the pod's limits, again without an OOM kill.
func (c *cluster) quotaStep(t *testing.T, ns string) {
	t.Helper()
	ctx := c.ctx
	c.startQuotaNode(t)
	if _, err := c.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.secret(ns, "regcred", c.auth.Password)
	// No quota controller runs here: the status is written as it would
	// (nothing used), and after each round reset, as it would once the
	// round's pods are gone.
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "tight", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: quotaCharge}}
	if _, err := c.admin.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resetUsed := func() {
		t.Helper()
		q, err := c.admin.CoreV1().ResourceQuotas(ns).Get(ctx, "tight", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		used := corev1.ResourceList{}
		for name := range quotaCharge {
			used[name] = resource.MustParse("0")
		}
		q.Status = corev1.ResourceQuotaStatus{Hard: quotaCharge, Used: used}
		if _, err := c.admin.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resetUsed()
	w := c.watchPrepull(t, ns)

	// The 10 images of the first cost case (pushed by setUp).
	var images []string
	for i := range costCases[0].images {
		images = append(images, c.images[costCases[0].image(i)])
	}
	c.applyCacheOn(c.dyn, ns, "tight", images, "regcred", "quota")
	round := func(reason string) {
		t.Helper()
		ic := c.waitDone(ns, "tight", reason)
		if ic.Status.Status != api.ActionStatusSucceeded || int(ic.Status.Counts.Succeeded) != len(images) {
			t.Fatalf("%s in a tight quota: %s %+v failures %+v", reason, ic.Status.Status, ic.Status.Counts, ic.Status.Failures)
		}
		for _, img := range images {
			c.mustHaveImage(quotaNode, img, true)
		}
		got, err := c.admin.CoreV1().ResourceQuotas(ns).Get(ctx, "tight", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range quotaCharge {
			if used := got.Status.Used[name]; used.Cmp(want) != 0 {
				t.Errorf("%s: quota used %s = %s, want one pod's %s", reason, name, used.String(), want.String())
			}
		}
		c.eventually(reason+": the tight quota's pre-pull pods are gone", func() bool { return c.noPrepullPods(ns) })
		w.check(t, reason)
	}
	round(api.ReasonImageCacheCreate)

	// A refresh: every image is on the node, so the kubelet starts each
	// container as soon as the previous one is started, within the pod's
	// limits.
	resetUsed()
	c.annotate(ns, "tight", api.RefreshAnnotation)
	round(api.ReasonImageCacheRefresh)

	if err := c.dyn.Resource(api.ImageCacheResource).Namespace(ns).Delete(ctx, "tight", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startQuotaNode starts quotaNode, labelled quota=yes (and cache=no, so
// the other steps' caches leave it out), with pod cgroups under
// quotaCgroupRoot, and stops and removes it when the test ends.
func (c *cluster) startQuotaNode(t *testing.T) {
	t.Helper()
	for _, sub := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"} {
		dir := filepath.Join("/sys/fs/cgroup", sub, quotaCgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if sub == "cpuset" {
			// A new cpuset has no CPUs or memory nodes until given its parent's.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, f), v, 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	bin, err := apiservertest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	n, err := nodetest.StartNode(c.ctx, nodetest.NodeOptions{Name: quotaNode, Server: c.srv, Kubelet: filepath.Join(bin, "kubelet"),
		SandboxImage: c.images["pause"], InsecureRegistries: []string{c.open.Host, c.priv.Host},
		Labels:      map[string]string{"quota": "yes", "cache": "no"},
		KubeletArgs: []string{"--cgroups-per-qos=true", "--cgroup-root=/" + quotaCgroupRoot}})
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes[quotaNode] = n
	c.mu.Unlock()
	t.Cleanup(func() {
		n.Stop()
		_ = c.admin.CoreV1().Nodes().Delete(context.Background(), quotaNode, metav1.DeleteOptions{})
		_ = c.dyn.Resource(api.NodeImagesResource).Delete(context.Background(), quotaNode, metav1.DeleteOptions{})
		for _, sub := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "systemd", "blkio", "devices", "freezer"} {
			removeCgroupTree(filepath.Join("/sys/fs/cgroup", sub, quotaCgroupRoot))
		}
	})
}

// removeCgroupTree removes the (empty) cgroup directories under dir, the
// deepest first.
func removeCgroupTree(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}

// prepullWatch records, for the pre-pull pods of one namespace, what their
// statuses said (the most containers running at once, every terminated
// container's reason and exit code) and what their pod cgroups on
// quotaNode held (limits, peak memory, OOM kills), until each pod is gone.
type prepullWatch struct {
	mu   sync.Mutex
	pods map[string]*podSeen // by UID
}

type podSeen struct {
	name        string
	resources   *corev1.ResourceRequirements
	containers  int
	maxRunning  int
	terminated  map[string]string // container -> reason/exit code
	cgroupSeen  bool
	memLimit    int64
	memPeak     int64
	cpuQuota    int64
	cpuPeriod   int64
	oomKills    int64
	checkedOnce bool
}

func (c *cluster) watchPrepull(t *testing.T, ns string) *prepullWatch {
	t.Helper()
	w := &prepullWatch{pods: map[string]*podSeen{}}
	ctx, cancel := context.WithCancel(c.ctx)
	f := informers.NewSharedInformerFactoryWithOptions(c.admin, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app.kubernetes.io/managed-by=pullrecords-controller" }))
	inf := f.Core().V1().Pods().Informer()
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		s := w.pods[string(p.UID)]
		if s == nil {
			s = &podSeen{name: p.Name, resources: p.Spec.Resources, containers: len(p.Spec.Containers), terminated: map[string]string{}}
			w.pods[string(p.UID)] = s
		}
		running := 0
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil {
				running++
			}
			if x := cs.State.Terminated; x != nil {
				s.terminated[cs.Name] = x.Reason + "/" + strconv.Itoa(int(x.ExitCode))
			}
		}
		for _, cs := range p.Status.InitContainerStatuses {
			if x := cs.State.Terminated; x != nil {
				s.terminated[cs.Name] = x.Reason + "/" + strconv.Itoa(int(x.ExitCode))
			}
		}
		s.maxRunning = max(s.maxRunning, running)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pre-pull pod informer did not sync")
	}
	// The pod cgroups, read as often as they may vanish.
	go wait.Until(func() { w.readCgroups() }, 20*time.Millisecond, ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	return w
}

// readCgroups reads the pod cgroups of quotaNode's pods that w knows.
func (w *prepullWatch) readCgroups() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, s := range w.pods {
		mem := podCgroup("memory", uid)
		if mem == "" {
			continue
		}
		s.cgroupSeen = true
		if v, ok := readInt(filepath.Join(mem, "memory.limit_in_bytes")); ok {
			s.memLimit = v
		}
		if v, ok := readInt(filepath.Join(mem, "memory.max_usage_in_bytes")); ok {
			s.memPeak = max(s.memPeak, v)
		}
		if data, err := os.ReadFile(filepath.Join(mem, "memory.oom_control")); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
					n, _ := strconv.ParseInt(v, 10, 64)
					s.oomKills = max(s.oomKills, n)
				}
			}
		}
		if cpu := podCgroup("cpu", uid); cpu != "" {
			if v, ok := readInt(filepath.Join(cpu, "cpu.cfs_quota_us")); ok {
				s.cpuQuota = v
			}
			if v, ok := readInt(filepath.Join(cpu, "cpu.cfs_period_us")); ok {
				s.cpuPeriod = v
			}
		}
	}
}

// podCgroup is the pod cgroup directory of the pod with uid in subsystem
// sub on quotaNode (any QoS class), or "".
func podCgroup(sub, uid string) string {
	matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", sub, quotaCgroupRoot, "kubepods", "*", "pod"+uid))
	more, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", sub, quotaCgroupRoot, "kubepods", "pod"+uid))
	if all := append(matches, more...); len(all) > 0 {
		return all[0]
	}
	return ""
}

func readInt(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return v, err == nil
}

// check asserts on the pods not yet checked (this round's): pod-level
// resources kept, no container OOM-killed or failed, a pod cgroup limited
// to the pod-level limits without an OOM kill; and logs what they did.
func (w *prepullWatch) check(t *testing.T, round string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	wantMem := resource.MustParse("128Mi")
	checked := 0
	for _, s := range w.pods {
		if s.checkedOnce {
			continue
		}
		s.checkedOnce = true
		checked++
		if s.resources == nil || s.resources.Limits.Cpu().Cmp(resource.MustParse("100m")) != 0 || s.resources.Limits.Memory().Cmp(wantMem) != 0 {
			t.Errorf("%s: pod %s has pod-level resources %v, want limits 100m and 128Mi", round, s.name, s.resources)
		}
		var reasons []string
		for name, r := range s.terminated {
			reasons = append(reasons, name+"="+r)
			if strings.HasPrefix(r, "OOMKilled") || !strings.HasSuffix(r, "/0") {
				t.Errorf("%s: pod %s container %s ended %s", round, s.name, name, r)
			}
		}
		sort.Strings(reasons)
		switch {
		case !s.cgroupSeen:
			t.Errorf("%s: pod %s: its pod cgroup on %s was never seen", round, s.name, quotaNode)
		case s.memLimit != wantMem.Value() || s.cpuPeriod == 0 || s.cpuQuota*1000/s.cpuPeriod != 100:
			t.Errorf("%s: pod %s: pod cgroup memory limit %d, CPU quota %d/%d, want %d and 100m", round, s.name, s.memLimit, s.cpuQuota, s.cpuPeriod, wantMem.Value())
		case s.oomKills != 0:
			t.Errorf("%s: pod %s: %d OOM kills in the pod cgroup", round, s.name, s.oomKills)
		}
		t.Logf("%s: pod %s, %d containers: at most %d running at once (seen); pod cgroup memory peak %.1f MiB of %d MiB, CPU quota %d/%d us, OOM kills %d; terminated %v",
			round, s.name, s.containers, s.maxRunning, float64(s.memPeak)/(1<<20), s.memLimit>>20, s.cpuQuota, s.cpuPeriod, s.oomKills, reasons)
	}
	if checked == 0 {
		t.Errorf("%s: no pre-pull pod was seen", round)
	}
}

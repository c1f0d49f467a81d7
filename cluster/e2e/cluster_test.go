//go:build clustere2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/cluster/agent"
	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/controller"
	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/cri"
)

const (
	agentNS = "pullrecords-system"
)

type cluster struct {
	t      *testing.T
	ctx    context.Context
	srv    *apiservertest.Server
	admin  kubernetes.Interface
	dyn    dynamic.Interface
	nodes  map[string]*nodetest.Node
	open   *nodetest.Registry
	priv   *nodetest.Registry
	auth   *nodetest.BasicAuth
	images map[string]string // short name -> reference

	mu     sync.Mutex
	agents map[string]context.CancelFunc
	ctl    context.CancelFunc
	ctlErr chan error
}

func repoFile(parts ...string) string {
	return filepath.Join(append([]string{"..", ".."}, parts...)...)
}

func TestClusterImageCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the cluster end-to-end test starts containerd and kubelets and must run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	c := setUp(t, ctx)

	tenantA, tenantB, tenantC := "tenant-a", "tenant-b", "tenant-c"
	for _, ns := range []string{tenantA, tenantB, tenantC} {
		if _, err := c.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.secret(tenantA, "regcred", c.auth.Password)
	c.secret(tenantC, "badcred", "not-the-password")

	// 1. A private and a public image for the two nodes labelled cache=yes.
	//    Its cost to the API server is read from the audit log, until the
	//    action's pods are gone.
	mark := c.auditMark()
	c.applyCache(tenantA, "web", []string{c.images["app"], c.images["web"]}, "regcred")
	ic := c.waitDone(tenantA, "web", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.Succeeded != 4 {
		t.Fatalf("create: %s %+v", ic.Status.Status, ic.Status.Counts)
	}
	c.eventually("the create's pre-pull pods are gone", func() bool { return c.noPrepullPods(tenantA) })
	cost := c.costSince(mark, tenantA)
	t.Logf("API cost of the create, %s", cost.perPair(4))
	// A regression guard at the cost measured with one pod per node for
	// both images (20.8 requests and 8.0 Events per pair; 27 and 11.5 with
	// one pod per (node, image)). Two images per pod is a small M: each
	// pod's own requests (create, delete, its Events and status writes)
	// are shared by two pairs only; 1b measures a larger M.
	if per := float64(cost.controller+cost.kubelet) / 4; per > 23 {
		t.Errorf("the create cost %.1f requests per (node, image), more than 23", per)
	}
	if per := float64(cost.events) / 4; per > 9 {
		t.Errorf("the create wrote %.1f Events per (node, image), more than 9", per)
	}
	for _, n := range []string{"node-a", "node-b"} {
		c.mustHaveImage(n, c.images["app"], true)
		c.mustHaveRecord(n, tenantA+"/regcred")
	}
	c.logTable(tenantA)
	c.mustHaveImage("node-c", c.images["app"], false)
	if recs := c.records("node-c"); len(recs) != 0 {
		t.Errorf("node-c is not selected but has pull records: %v", recs)
	}

	// 1b. Caches of many private images on the same two nodes, each in a
	//     namespace of its own (costcase_test.go): pods of several images
	//     each make the cost per (node, image) small once a pod carries
	//     more than a few; at 32 (the default pod) the kubelet's Events per
	//     pod stay at its spam filter's 25, under one per pair.
	for _, cc := range costCases {
		c.measureCreate(t, cc)
	}
	for _, cc := range costCases {
		if err := c.dyn.Resource(api.ImageCacheResource).Namespace(cc.ns).Delete(ctx, costCacheName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// 1c. A namespace whose quota admits one pre-pull pod's pod-level
	//     resources, on a node of its own that makes pod cgroups.
	c.quotaStep(t, "tenant-q")

	// 2. KEP-2535 on node-a: another namespace without the secret is refused
	//    the cached image; a pod holding the secret starts without a pull.
	c.pod(tenantB, "snoop", "node-a", c.images["app"], "")
	c.waitPod(tenantB, "snoop", "refused (ErrImagePull)", func(p *corev1.Pod) bool { return waitingReason(p, "ErrImagePull", "ImagePullBackOff") })
	c.pod(tenantA, "user", "node-a", c.images["app"], "regcred")
	c.waitPod(tenantA, "user", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if msg := c.pulledEvent(tenantA, "user"); !strings.Contains(msg, "already present") {
		t.Errorf("the pod with the secret was not started from the cached image; kubelet said %q", msg)
	}

	// 3. Update: add a private image, remove the public one (purged by the agents).
	c.applyCache(tenantA, "web", []string{c.images["app"], c.images["tool"]}, "regcred")
	ic = c.waitDone(tenantA, "web", api.ReasonImageCacheUpdate)
	if ic.Status.Status != api.ActionStatusSucceeded {
		t.Fatalf("update: %+v", ic.Status)
	}
	for _, n := range []string{"node-a", "node-b"} {
		c.mustHaveImage(n, c.images["tool"], true)
		c.eventually(n+": removed image purged", func() bool { return !c.hasImage(n, c.images["web"]) })
	}

	// 4. A label change brings node-c in, without a refresh.
	c.label("node-c", "yes")
	c.eventually("node-c pulled", func() bool {
		ic := c.cache(tenantA, "web")
		return ic.Status.Status == api.ActionStatusSucceeded && ic.Status.Counts != nil && ic.Status.Counts.Desired == 6
	})
	c.mustHaveImage("node-c", c.images["tool"], true)
	c.mustHaveRecord("node-c", tenantA+"/regcred")

	// 5. A wrong password: Failed, the failure listed per node. The public
	//    image in the same pods is pulled all the same (the kubelet goes on
	//    to the next container), and only it counts as pulled.
	c.applyCache(tenantC, "bad", []string{c.images["app"], c.images["ok"]}, "badcred")
	ic = c.waitDone(tenantC, "bad", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusFailed || len(ic.Status.Failures[c.images["app"]]) != 3 || len(ic.Status.Failures) != 1 ||
		ic.Status.Counts.Succeeded != 3 || ic.Status.Counts.Failed != 3 {
		t.Fatalf("wrong password: %s %+v %+v", ic.Status.Status, ic.Status.Counts, ic.Status.Failures)
	}
	c.eventually("the wrong password's pods are gone", func() bool { return c.noPrepullPods(tenantC) })
	for _, f := range ic.Status.Failures[c.images["app"]] {
		if !strings.Contains(strings.ToLower(f.Message), "unauthorized") && !strings.Contains(f.Message, "401") {
			t.Errorf("failure on %s does not say the registry refused: %+v", f.Node, f)
		}
	}

	// 6. The controller is killed mid-batch and an agent is killed: every
	//    request still gets a result once a controller runs again.
	c.stopAgent("node-b")
	c.applyCache(tenantA, "late", []string{c.images["late"]}, "")
	c.eventually("pre-pull pods in flight", func() bool {
		pods, _ := c.admin.CoreV1().Pods(tenantA).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=pullrecords-controller"})
		return pods != nil && len(pods.Items) > 0
	})
	c.stopController()
	c.startController()
	ic = c.waitDone(tenantA, "late", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.Desired != 3 || ic.Status.Counts.Succeeded+ic.Status.Counts.AlreadyPulled != 3 {
		t.Fatalf("after the restart: %s %+v", ic.Status.Status, ic.Status.Counts)
	}
	c.startAgent("node-b")
	c.eventually("node-b's agent reports again", func() bool {
		u, err := c.dyn.Resource(api.NodeImagesResource).Get(ctx, "node-b", metav1.GetOptions{})
		if err != nil {
			return false
		}
		var ni api.NodeImages
		_ = api.FromUnstructured(u, &ni)
		return ni.Status.Agent != nil && time.Since(ni.Status.Agent.HeartbeatTime.Time) < 5*time.Second
	})
	// The failed cache wants the same image: gone, it keeps nothing.
	if err := c.dyn.Resource(api.ImageCacheResource).Namespace(tenantC).Delete(ctx, "bad", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// 7. Tenant B, with ImageCache rights in its own namespace only, lists
	//    tenant A's private image and the nodes' sandbox (pause) image,
	//    which it finds present, then deletes its cache: both stay.
	tenantBClient := c.tenantClient(tenantB)
	c.applyCacheAs(tenantBClient, tenantB, "found", []string{c.images["app"], c.images["pause"]}, "")
	ic = c.waitDone(tenantB, "found", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.AlreadyPulled != 6 {
		t.Fatalf("tenant B's cache: %s %+v, want 6 alreadypulled", ic.Status.Status, ic.Status.Counts)
	}
	if err := tenantBClient.Resource(api.ImageCacheResource).Namespace(tenantB).Delete(ctx, "found", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		c.eventually(n+": tenant B's delete seen by the agent", func() bool {
			u, err := c.dyn.Resource(api.NodeImagesResource).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false
			}
			var ni api.NodeImages
			_ = api.FromUnstructured(u, &ni)
			for _, img := range ni.Spec.Images {
				for _, k := range img.Caches {
					if k == tenantB+"/found" {
						return false
					}
				}
			}
			return ni.Status.Agent != nil && ni.Status.Agent.ObservedGeneration >= ni.Generation
		})
		c.mustHaveImage(n, c.images["app"], true)
		c.mustHaveImage(n, c.images["pause"], true)
	}

	// 7b. A tag pair of one content (s:stable and s:v1, one image in
	//     containerd): tenant B pulls s:stable, tenant C keeps s:v1; B's
	//     delete leaves the image and C's cache stays Succeeded. (A removal
	//     by reference takes every tag of the image.)
	tenantCClient := c.tenantClient(tenantC)
	c.applyCacheAs(tenantBClient, tenantB, "pair", []string{c.images["stable"]}, "")
	if ic := c.waitDone(tenantB, "pair", api.ReasonImageCacheCreate); ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.Succeeded != 3 {
		t.Fatalf("tenant B's s:stable: %s %+v, want pulled on 3 nodes", ic.Status.Status, ic.Status.Counts)
	}
	c.applyCacheAs(tenantCClient, tenantC, "keeper", []string{c.images["v1"]}, "")
	if ic := c.waitDone(tenantC, "keeper", api.ReasonImageCacheCreate); ic.Status.Status != api.ActionStatusSucceeded {
		t.Fatalf("tenant C's s:v1: %s %+v", ic.Status.Status, ic.Status.Counts)
	}
	if err := tenantBClient.Resource(api.ImageCacheResource).Namespace(tenantB).Delete(ctx, "pair", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		c.eventually(n+": tenant B's s:stable purge answered", func() bool {
			u, err := c.dyn.Resource(api.NodeImagesResource).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false
			}
			var ni api.NodeImages
			_ = api.FromUnstructured(u, &ni)
			for _, img := range ni.Spec.Images {
				if img.Image == c.images["stable"] {
					return false
				}
			}
			return len(ni.Spec.Purge) == 0 && ni.Status.Agent != nil && ni.Status.Agent.ObservedGeneration >= ni.Generation
		})
		c.mustHaveImage(n, c.images["v1"], true)
	}
	if ic := c.cache(tenantC, "keeper"); ic.Status.Status != api.ActionStatusSucceeded {
		t.Errorf("tenant C's cache after B's delete: %+v", ic.Status)
	}

	// 8. Purge: the cache's images leave every node, except where a
	//    container still uses one (tenant A's finished pod on node-a); the
	//    cache stays.
	c.annotate(tenantA, "web", api.PurgeAnnotation)
	c.eventually("purge done", func() bool {
		ic := c.cache(tenantA, "web")
		_, asked := ic.Annotations[api.PurgeAnnotation]
		return !asked && ic.Status.Reason == api.ReasonImageCachePurge && ic.Status.Status == api.ActionStatusSucceeded
	})
	for _, n := range []string{"node-b", "node-c"} {
		c.eventually(n+": purged", func() bool { return !c.hasImage(n, c.images["app"]) && !c.hasImage(n, c.images["tool"]) })
	}
	c.eventually("node-a: tool purged", func() bool { return !c.hasImage("node-a", c.images["tool"]) })
	c.mustHaveImage("node-a", c.images["app"], true)
	if r := c.result("node-a", tenantA+"/web", c.images["app"]); !strings.HasPrefix(r.Message, "kept: in use by a container") {
		t.Errorf("node-a's purge result for the image tenant A's pod ran: %+v, want kept: in use by a container", r)
	}
	c.logTable(tenantA)

	// 9. Delete: the nodes' objects forget the cache.
	if err := c.dyn.Resource(api.ImageCacheResource).Namespace(tenantA).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		c.eventually(n+": spec forgets the deleted cache", func() bool {
			u, err := c.dyn.Resource(api.NodeImagesResource).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false
			}
			var ni api.NodeImages
			_ = api.FromUnstructured(u, &ni)
			for _, img := range ni.Spec.Images {
				for _, k := range img.Caches {
					if k == tenantA+"/web" {
						return false
					}
				}
			}
			return true
		})
	}
}

func setUp(t *testing.T, ctx context.Context) *cluster {
	bin, err := apiservertest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"node-a", "node-b", "node-c"}
	// quotaNode (quota_test.go) starts later, in its own step, with a
	// node identity of its own like the others.
	srv, err := apiservertest.Start(ctx, apiservertest.Options{NodeNames: append(names[:len(names):len(names)], quotaNode), AuditLog: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c := &cluster{t: t, ctx: ctx, srv: srv, admin: kubernetes.NewForConfigOrDie(srv.Admin), dyn: dynamic.NewForConfigOrDie(srv.Admin),
		nodes: map[string]*nodetest.Node{}, images: map[string]string{}, agents: map[string]context.CancelFunc{}}
	if err := apiservertest.Apply(ctx, srv.Admin,
		repoFile("deploy", "crds", "imagecaches.kubefledged.io.yaml"), repoFile("deploy", "crds", "nodeimages.pullrecords.io.yaml"),
		repoFile("deploy", "cluster", "namespace.yaml"), repoFile("deploy", "cluster", "rbac.yaml"), repoFile("deploy", "cluster", "admission.yaml")); err != nil {
		t.Fatal(err)
	}

	c.auth = &nodetest.BasicAuth{Username: "tenant-a-robot", Password: fmt.Sprintf("pw-%d", time.Now().UnixNano())}
	if c.open, err = nodetest.StartRegistry(ctx, t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.open.Stop)
	if c.priv, err = nodetest.StartRegistry(ctx, t.TempDir(), c.auth); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.priv.Stop)
	build := func(pkg string) []byte {
		out := filepath.Join(t.TempDir(), filepath.Base(pkg))
		if err := nodetest.BuildStatic(ctx, pkg, out); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	pause := build("../internal/cmd/pause")
	noop := build("../cmd/pullrecords-noop")
	push := func(short string, reg *nodetest.Registry, ref string, files map[string]nodetest.File, entry []string, auth *nodetest.BasicAuth) {
		if _, err := nodetest.PushImage(ctx, reg, reg.Host+"/"+ref, files, entry, auth); err != nil {
			t.Fatal(err)
		}
		c.images[short] = reg.Host + "/" + ref
	}
	withTag := func(tag string) map[string]nodetest.File {
		return map[string]nodetest.File{"pause": {Data: pause, Mode: 0o755}, "etc/which": {Data: []byte(tag + "\n")}}
	}
	push("pause", c.open, "e2e/pause:v1", withTag("pause"), []string{"/pause"}, nil)
	push("noop", c.open, "pullrecords/pullrecords:e2e", map[string]nodetest.File{"pullrecords-noop": {Data: noop, Mode: 0o755}}, []string{"/pullrecords-noop"}, nil)
	// Admission admits only pre-pull pods whose init container runs this image.
	noopParam := fmt.Sprintf(`{"data":{"noopImage":%q}}`, c.images["noop"])
	if _, err := c.admin.CoreV1().ConfigMaps("pullrecords-system").Patch(ctx, "pullrecords-prepull", "application/merge-patch+json",
		[]byte(noopParam), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	push("web", c.open, "public/web:1", withTag("web"), []string{"/pause"}, nil)
	push("late", c.open, "public/late:1", withTag("late"), []string{"/pause"}, nil)
	push("ok", c.open, "public/ok:1", withTag("ok"), []string{"/pause"}, nil)
	push("stable", c.open, "public/s:stable", withTag("s"), []string{"/pause"}, nil)
	push("v1", c.open, "public/s:v1", withTag("s"), []string{"/pause"}, nil)
	push("app", c.priv, "tenant-a/app:1", withTag("app"), []string{"/pause"}, c.auth)
	push("tool", c.priv, "tenant-a/tool:1", withTag("tool"), []string{"/pause"}, c.auth)
	for _, cc := range costCases {
		for i := range cc.images {
			name := cc.image(i)
			push(name, c.priv, cc.ns+"/"+name+":1", withTag(name), []string{"/pause"}, c.auth)
		}
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, name := range names {
		wg.Go(func() {
			labels := map[string]string{"cache": "no"}
			if name != "node-c" {
				labels["cache"] = "yes"
			}
			n, err := nodetest.StartNode(ctx, nodetest.NodeOptions{Name: name, Server: srv, Kubelet: filepath.Join(bin, "kubelet"),
				SandboxImage: c.images["pause"], InsecureRegistries: []string{c.open.Host, c.priv.Host}, Labels: labels})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			c.nodes[name] = n
		})
	}
	wg.Wait()
	for _, n := range c.nodes {
		t.Cleanup(n.Stop)
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, name := range names {
		c.startAgent(name)
	}
	c.startController()
	// The agents report before the first cache, as a deployed DaemonSet
	// does: a pre-pull the agent saw absent is this cache's to purge.
	for _, name := range names {
		c.eventually(name+"'s agent reports", func() bool {
			u, err := c.dyn.Resource(api.NodeImagesResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			var ni api.NodeImages
			_ = api.FromUnstructured(u, &ni)
			return ni.Status.Agent != nil
		})
	}
	t.Cleanup(func() {
		c.stopController()
		c.mu.Lock()
		for _, stop := range c.agents {
			stop()
		}
		c.mu.Unlock()
	})
	return c
}

// startAgent runs node's agent in this process under the agent's service
// account, with a token bound to a pod on that node (as the DaemonSet's
// pod would have), talking to the node's containerd through the CRI.
func (c *cluster) startAgent(node string) {
	c.t.Helper()
	podName := "agent-" + node
	if _, err := c.admin.CoreV1().Pods(agentNS).Get(c.ctx, podName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: agentNS},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "pullrecords-agent", AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "agent", Image: c.images["pause"]}}}}
		if _, err := c.admin.CoreV1().Pods(agentNS).Create(c.ctx, pod, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
	cfg, err := c.srv.ServiceAccountConfig(c.ctx, agentNS, "pullrecords-agent", podName)
	if err != nil {
		c.t.Fatal(err)
	}
	svc, err := cri.Dial(c.ctx, c.nodes[node].CRIEndpoint)
	if err != nil {
		c.t.Fatal(err)
	}
	guard, conn, err := agent.DialCRIGuard(c.nodes[node].CRIEndpoint)
	if err != nil {
		c.t.Fatal(err)
	}
	a, err := agent.New(agent.Config{NodeName: node, Dynamic: dynamic.NewForConfigOrDie(cfg), Runtime: svc, Guard: guard, ResyncInterval: 5 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx); svc.Close(); conn.Close() }()
	c.mu.Lock()
	c.agents[node] = func() { cancel(); <-done }
	c.mu.Unlock()
}

func (c *cluster) stopAgent(node string) {
	c.mu.Lock()
	stop := c.agents[node]
	delete(c.agents, node)
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (c *cluster) startController() {
	c.t.Helper()
	cfg, err := c.srv.ServiceAccountConfig(c.ctx, agentNS, "pullrecords-controller", "")
	if err != nil {
		c.t.Fatal(err)
	}
	ctl, err := controller.New(controller.Config{
		Kube: kubernetes.NewForConfigOrDie(controller.Protobuf(cfg)), Dynamic: dynamic.NewForConfigOrDie(cfg),
		NoopImage: c.images["noop"], RefreshInterval: -1, PullDeadline: 2 * time.Minute, AgentTimeout: 15 * time.Second,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.ctl, c.ctlErr = cancel, make(chan error, 1)
	go func() { c.ctlErr <- ctl.Run(ctx) }()
}

func (c *cluster) stopController() {
	if c.ctl == nil {
		return
	}
	c.ctl()
	if err := <-c.ctlErr; err != nil {
		c.t.Errorf("controller: %v", err)
	}
	c.ctl = nil
}

func (c *cluster) secret(ns, name, password string) {
	c.t.Helper()
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{c.priv.Host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(c.auth.Username + ":" + password))}}})
	if _, err := c.admin.CoreV1().Secrets(ns).Create(c.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg}}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// applyCache writes an ImageCache as a user would (kubectl apply).
func (c *cluster) applyCache(ns, name string, images []string, secret string) {
	c.t.Helper()
	c.applyCacheAs(c.dyn, ns, name, images, secret)
}

// applyCacheAs is applyCache with the client dyn (a tenant's).
func (c *cluster) applyCacheAs(dyn dynamic.Interface, ns, name string, images []string, secret string) {
	c.t.Helper()
	c.applyCacheOn(dyn, ns, name, images, secret, "cache")
}

// applyCacheOn is applyCacheAs for the nodes labelled label=yes.
func (c *cluster) applyCacheOn(dyn dynamic.Interface, ns, name string, images []string, secret, label string) {
	c.t.Helper()
	doc := fmt.Sprintf("apiVersion: kubefledged.io/v1alpha2\nkind: ImageCache\nmetadata: {name: %s, namespace: %s}\nspec:\n  cacheSpec:\n  - images: [%s]\n    nodeSelector: {%s: \"yes\"}\n",
		name, ns, strings.Join(images, ", "), label)
	if secret != "" {
		doc += "  imagePullSecrets: [{name: " + secret + "}]\n"
	}
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := dyn.Resource(api.ImageCacheResource).Namespace(ns).Patch(c.ctx, name, "application/apply-patch+yaml", data,
		metav1.PatchOptions{FieldManager: "kubectl", Force: ptr.To(true)}); err != nil {
		c.t.Fatal(err)
	}
}

// tenantClient returns a client for service account "tenant" of ns, which
// may manage ImageCaches in ns only (a Role an admin grants a tenant).
func (c *cluster) tenantClient(ns string) dynamic.Interface {
	c.t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "imagecache-owner", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{api.KubeFledgedGroup}, Resources: []string{"imagecaches"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
	}}}
	if _, err := c.admin.RbacV1().Roles(ns).Create(c.ctx, role, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "imagecache-owner", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}}
	if _, err := c.admin.RbacV1().RoleBindings(ns).Create(c.ctx, binding, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	cfg, err := c.srv.ServiceAccountConfig(c.ctx, ns, "tenant", "")
	if err != nil {
		c.t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(cfg)
}

// result returns the node's result for (cache, image).
func (c *cluster) result(node, cache, image string) api.NodeResult {
	c.t.Helper()
	u, err := c.dyn.Resource(api.NodeImagesResource).Get(c.ctx, node, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var ni api.NodeImages
	if err := api.FromUnstructured(u, &ni); err != nil {
		c.t.Fatal(err)
	}
	for _, r := range ni.Status.Results {
		if r.Cache == cache && r.Image == image {
			return r
		}
	}
	return api.NodeResult{}
}

func (c *cluster) annotate(ns, name, key string) {
	c.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, key)
	if _, err := c.dyn.Resource(api.ImageCacheResource).Namespace(ns).Patch(c.ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) label(node, value string) {
	c.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{"cache":%q}}}`, value)
	if _, err := c.admin.CoreV1().Nodes().Patch(c.ctx, node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) cache(ns, name string) *api.ImageCache {
	c.t.Helper()
	u, err := c.dyn.Resource(api.ImageCacheResource).Namespace(ns).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var ic api.ImageCache
	if err := api.FromUnstructured(u, &ic); err != nil {
		c.t.Fatal(err)
	}
	return &ic
}

func (c *cluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			c.t.Fatalf("never reached: %s\n%s", what, c.dump())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *cluster) waitDone(ns, name, reason string) *api.ImageCache {
	c.t.Helper()
	var ic *api.ImageCache
	c.eventually(fmt.Sprintf("%s/%s finishes a %s", ns, name, reason), func() bool {
		ic = c.cache(ns, name)
		st := ic.Status
		return st.Status != "" && st.Status != api.ActionStatusProcessing && st.Reason == reason && st.ObservedGeneration == ic.Generation
	})
	c.t.Logf("%s/%s %s: %s (%s)", ns, name, reason, ic.Status.Status, ic.Status.Message)
	return ic
}

func (c *cluster) hasImage(node, image string) bool {
	c.t.Helper()
	svc, err := cri.Dial(c.ctx, c.nodes[node].CRIEndpoint)
	if err != nil {
		c.t.Fatal(err)
	}
	defer svc.Close()
	img, err := svc.ImageStatus(c.ctx, image)
	if err != nil {
		c.t.Fatal(err)
	}
	return img != nil
}

func (c *cluster) mustHaveImage(node, image string, want bool) {
	c.t.Helper()
	if got := c.hasImage(node, image); got != want {
		c.t.Errorf("%s has %s: %v, want %v", node, image, got, want)
	}
}

// records returns the kubelet's pulled records on node (file contents).
func (c *cluster) records(node string) []string {
	dir := filepath.Join(c.nodes[node].RootDir, "image_manager", "pulled")
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
			out = append(out, string(data))
		}
	}
	return out
}

// mustHaveRecord checks that node's kubelet recorded a pull with the
// secret namespace/name (KEP-2535's pulled record names its coordinates).
func (c *cluster) mustHaveRecord(node, secret string) {
	c.t.Helper()
	ns, name, _ := strings.Cut(secret, "/")
	for _, r := range c.records(node) {
		if strings.Contains(r, `"namespace":"`+ns+`"`) && strings.Contains(r, `"name":"`+name+`"`) {
			return
		}
	}
	c.t.Errorf("%s: no pull record names secret %s; records: %v", node, secret, c.records(node))
}

func (c *cluster) pod(ns, name, node, image, secret string) {
	c.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"-exit-after", "0s"}}}}}
	if secret != "" {
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secret}}
	}
	if _, err := c.admin.CoreV1().Pods(ns).Create(c.ctx, p, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) waitPod(ns, name, what string, done func(*corev1.Pod) bool) {
	c.t.Helper()
	c.eventually(ns+"/"+name+" "+what, func() bool {
		p, err := c.admin.CoreV1().Pods(ns).Get(c.ctx, name, metav1.GetOptions{})
		return err == nil && done(p)
	})
}

func waitingReason(p *corev1.Pod, reasons ...string) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return false
		}
		for _, r := range reasons {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason == r {
				return true
			}
		}
	}
	return false
}

// pulledEvent is the kubelet's Pulled event message for the pod.
func (c *cluster) pulledEvent(ns, pod string) string {
	var msg string
	c.eventually("the kubelet's Pulled event for "+pod, func() bool {
		evs, err := c.admin.CoreV1().Events(ns).List(c.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "Pulled" {
				msg = e.Message
				return true
			}
		}
		return false
	})
	return msg
}

// logTable prints the namespace's ImageCaches as kubectl get ic does: the
// API server's Table rendering with the CRD's printer columns.
func (c *cluster) logTable(ns string) {
	hc, err := rest.HTTPClientFor(c.srv.Admin)
	if err != nil {
		c.t.Errorf("table: %v", err)
		return
	}
	req, _ := http.NewRequestWithContext(c.ctx, http.MethodGet, c.srv.URL+"/apis/kubefledged.io/v1alpha2/namespaces/"+ns+"/imagecaches", nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	req.Header.Set("Authorization", "Bearer "+c.srv.AdminToken)
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Errorf("table: %v", err)
		return
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		c.t.Errorf("table: %v", err)
		return
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 8, 3, ' ', 0)
	var header []string
	for _, col := range table.ColumnDefinitions {
		if col.Priority == 0 {
			header = append(header, strings.ToUpper(col.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, row := range table.Rows {
		var cells []string
		for i := range header {
			if i < len(row.Cells) {
				cells = append(cells, fmt.Sprint(row.Cells[i]))
			}
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	w.Flush()
	c.t.Logf("kubectl get ic -n %s:\n%s", ns, b.String())
}

// dump is the state a failure report needs: every ImageCache's status and
// every NodeImages object.
func (c *cluster) dump() string {
	var b strings.Builder
	ctx := context.Background()
	for _, r := range []struct {
		res        string
		namespaced bool
	}{{"imagecaches", true}, {"nodeimages", false}} {
		gvr := api.ImageCacheResource
		if r.res == "nodeimages" {
			gvr = api.NodeImagesResource
		}
		list, err := c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", r.res, err)
			continue
		}
		for _, item := range list.Items {
			unstructured.RemoveNestedField(item.Object, "metadata", "managedFields")
			data, _ := yaml.Marshal(item.Object)
			fmt.Fprintf(&b, "--- %s %s/%s\n%s", r.res, item.GetNamespace(), item.GetName(), data)
		}
	}
	return b.String()
}

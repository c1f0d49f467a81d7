package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/cluster/agent"
	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/controller"
	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/cri/critest"
)

// tenant acts as a tenant would: its own namespace and service account,
// holding only the ImageCache rights a cluster admin grants a tenant in its
// namespace (the shipped manifests grant tenants nothing), under the
// shipped RBAC and admission policies.
type tenant struct {
	e   *env
	ns  string
	dyn dynamic.Interface
}

// tenant creates namespace <test namespace>-<name> with service account
// "tenant" and a Role there for ImageCaches, and returns a client that
// authenticates as that service account.
func (e *env) tenant(name string) *tenant {
	e.t.Helper()
	ns := e.ns + "-" + name
	s := apiservertest.Current()
	if _, err := e.admin.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "imagecache-owner", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{api.KubeFledgedGroup}, Resources: []string{"imagecaches"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
	}}}
	if _, err := e.admin.RbacV1().Roles(ns).Create(e.ctx, role, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "imagecache-owner", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}}
	if _, err := e.admin.RbacV1().RoleBindings(ns).Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	cfg, err := s.ServiceAccountConfig(e.ctx, ns, "tenant", "")
	if err != nil {
		e.t.Fatal(err)
	}
	tn := &tenant{e: e, ns: ns, dyn: dynamic.NewForConfigOrDie(cfg)}
	e.t.Cleanup(func() {
		ctx := context.Background()
		list, _ := e.dyn.Resource(api.ImageCacheResource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if list != nil {
			for _, ic := range list.Items {
				_ = e.dyn.Resource(api.ImageCacheResource).Namespace(ns).Delete(ctx, ic.GetName(), metav1.DeleteOptions{})
			}
		}
		_ = e.admin.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	})
	// The grant holds: the tenant may not touch another namespace.
	if _, err := tn.dyn.Resource(api.ImageCacheResource).Namespace(e.ns).List(e.ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		e.t.Fatalf("tenant %s lists ImageCaches of %s: %v, want Forbidden", ns, e.ns, err)
	}
	return tn
}

// applyCache creates or replaces the tenant's ImageCache name, listing
// images for the test's selected nodes, with pull secret regcred if
// secret.
func (tn *tenant) applyCache(name string, secret bool, images ...string) {
	tn.e.t.Helper()
	doc := fmt.Sprintf("apiVersion: kubefledged.io/v1alpha2\nkind: ImageCache\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  cacheSpec:\n  - images: [%s]\n    nodeSelector: {%s: \"yes\"}\n",
		name, tn.ns, strings.Join(images, ", "), tn.e.label)
	if secret {
		doc += "  imagePullSecrets:\n  - name: regcred\n"
	}
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		tn.e.t.Fatal(err)
	}
	if _, err := tn.dyn.Resource(api.ImageCacheResource).Namespace(tn.ns).Patch(tn.e.ctx, name, "application/apply-patch+yaml", data,
		metav1.PatchOptions{FieldManager: "kubectl", Force: ptr.To(true)}); err != nil {
		tn.e.t.Fatalf("tenant %s applying ImageCache %s: %v", tn.ns, name, err)
	}
}

func (tn *tenant) purge(name string) {
	tn.e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, api.PurgeAnnotation)
	if _, err := tn.dyn.Resource(api.ImageCacheResource).Namespace(tn.ns).Patch(tn.e.ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		tn.e.t.Fatal(err)
	}
}

func (tn *tenant) delete(name string) {
	tn.e.t.Helper()
	if err := tn.dyn.Resource(api.ImageCacheResource).Namespace(tn.ns).Delete(tn.e.ctx, name, metav1.DeleteOptions{}); err != nil {
		tn.e.t.Fatal(err)
	}
}

func (tn *tenant) cache(name string) *api.ImageCache {
	tn.e.t.Helper()
	u, err := tn.dyn.Resource(api.ImageCacheResource).Namespace(tn.ns).Get(tn.e.ctx, name, metav1.GetOptions{})
	if err != nil {
		tn.e.t.Fatal(err)
	}
	var ic api.ImageCache
	if err := api.FromUnstructured(u, &ic); err != nil {
		tn.e.t.Fatal(err)
	}
	return &ic
}

// waitDone waits until the cache's action of reason has finished.
func (tn *tenant) waitDone(name, reason string) *api.ImageCache {
	tn.e.t.Helper()
	var last *api.ImageCache
	tn.e.waitFor(fmt.Sprintf("%s/%s finished a %s action", tn.ns, name, reason), func() bool {
		last = tn.cache(name)
		st := last.Status
		return st.Status != "" && st.Status != api.ActionStatusProcessing && st.Reason == reason && st.ObservedGeneration == last.Generation
	})
	return last
}

// results returns the cache's results of its current batch on node.
func (tn *tenant) results(node string, ic *api.ImageCache) map[string]api.NodeResult {
	return resultsOf(tn.e.nodeImages(node), tn.ns+"/"+ic.Name, ic.Status.Batch)
}

// nodeRuntime is a node's fake CRI runtime and its agent.
type nodeRuntime struct {
	e        *env
	node     string
	fake     *critest.ImageService
	endpoint string
	stop     context.CancelFunc
	done     chan struct{}
}

// startRuntime gives node a fake CRI runtime, which the stand-in kubelet's
// successful pulls fill and whose image IDs it reports as the kubelet
// does (the repository digest), and starts its agent.
func (e *env) startRuntime(node string) *nodeRuntime {
	e.t.Helper()
	r := &nodeRuntime{e: e, node: node, fake: critest.NewImageService()}
	r.endpoint = r.fake.Serve(e.t)
	e.mu.Lock()
	e.runtimes[node] = r.fake
	e.mu.Unlock()
	e.kubelet.SetImageID(func(node, image string) string { return repoDigest(image) })
	// The node's object, as the controller creates it for every node, so
	// that the agent reports before the first cache.
	obj := fmt.Sprintf(`{"apiVersion":"pullrecords.io/v1alpha1","kind":"NodeImages","metadata":{"name":%q}}`, node)
	if _, err := e.dyn.Resource(api.NodeImagesResource).Patch(e.ctx, node, "application/apply-patch+yaml", []byte(obj),
		metav1.PatchOptions{FieldManager: "test-setup", Force: ptr.To(true)}); err != nil {
		e.t.Fatal(err)
	}
	r.startAgent()
	e.waitFor("the agent of "+node+" reports", func() bool {
		ni := e.nodeImages(node)
		return ni != nil && ni.Status.Agent != nil
	})
	return r
}

// repoDigest is the image reference a kubelet reports as a pulled
// container's imageID (containerd's repository digest): the fake's
// digest of image, under its repository.
func repoDigest(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return ""
	}
	d, err := critest.Digest(image)
	if err != nil {
		return ""
	}
	return named.Name() + "@" + d
}

// startAgent runs the node's agent as the shipped DaemonSet's would: the
// pullrecords-agent service account, its token bound to a pod on the node.
func (r *nodeRuntime) startAgent() {
	e := r.e
	e.t.Helper()
	const agentNS = "pullrecords-system"
	podName := "agent-" + r.node
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: agentNS},
		Spec: corev1.PodSpec{NodeName: r.node, ServiceAccountName: "pullrecords-agent", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "agent", Image: "registry.test/pullrecords:test"}}}}
	if _, err := e.admin.CoreV1().Pods(agentNS).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.admin.CoreV1().Pods(agentNS).Delete(context.Background(), podName, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	cfg, err := apiservertest.Current().ServiceAccountConfig(e.ctx, agentNS, "pullrecords-agent", podName)
	if err != nil {
		e.t.Fatal(err)
	}
	svc, err := cri.Dial(e.ctx, r.endpoint)
	if err != nil {
		e.t.Fatal(err)
	}
	guard, conn, err := agent.DialCRIGuard(r.endpoint)
	if err != nil {
		e.t.Fatal(err)
	}
	a, err := agent.New(agent.Config{NodeName: r.node, Dynamic: dynamic.NewForConfigOrDie(cfg), Runtime: svc, Guard: guard, ResyncInterval: time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	_, tctx := ktesting.NewTestContext(e.t.(*testing.T))
	ctx, cancel := context.WithCancel(tctx)
	r.stop, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		if err := a.Run(ctx); err != nil {
			e.t.Errorf("agent of %s: %v", r.node, err)
		}
		_ = svc.Close()
		_ = conn.Close()
	}()
	e.t.Cleanup(r.stopAgent)
}

func (r *nodeRuntime) stopAgent() {
	if r.stop == nil {
		return
	}
	r.stop()
	<-r.done
	r.stop = nil
}

func (r *nodeRuntime) add(image string) string {
	r.e.t.Helper()
	id, err := r.fake.AddImage(image)
	if err != nil {
		r.e.t.Fatal(err)
	}
	return id
}

// removed returns the image IDs the runtime was asked to remove.
func (r *nodeRuntime) removed() []string {
	var out []string
	for _, c := range r.fake.Calls() {
		if c.Method == critest.RemoveImage && !slices.Contains(out, c.Image) {
			out = append(out, c.Image)
		}
	}
	return out
}

// useImages makes the runtime report one container per image ID, as
// another tenant's pods would run them.
func (r *nodeRuntime) useImages(ids ...string) {
	var cs []*runtimeapi.Container
	for i, id := range ids {
		cs = append(cs, &runtimeapi.Container{Id: fmt.Sprintf("c%d", i), ImageRef: id, Image: &runtimeapi.ImageSpec{Image: id},
			State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	}
	r.fake.SetContainers(cs...)
}

// emptied waits until the node's spec lists nothing, to keep or to purge,
// and the agent has seen that spec.
func (e *env) emptied(node string) {
	e.t.Helper()
	e.waitFor("spec of "+node+" emptied and seen by its agent", func() bool {
		ni := e.nodeImages(node)
		return ni != nil && len(ni.Spec.Images) == 0 && len(ni.Spec.Purge) == 0 &&
			ni.Status.Agent != nil && ni.Status.Agent.ObservedGeneration >= ni.Generation
	})
}

// A tenant's caches remove only what they pulled: images found on the node
// (another tenant's running image, the pause image, an idle image; with or
// without a pull secret) stay through the tenant's purges and deletes, and
// an image the tenant pulled stays while another tenant's container uses
// it, and goes once none does. The old controller removed all of them.
func TestTenantPurgesRemoveOnlyWhatItPulled(t *testing.T) {
	e := newEnv(t)
	n := e.addNode("n", true)
	rt := e.startRuntime(n)
	const (
		aApp   = "registry.test/public/a-app:1"
		pause  = "registry.k8s.io/pause:3.10"
		idle   = "registry.test/public/idle:1"
		bTool  = "registry.test/public/b-tool:1"
		shared = "registry.test/public/shared:1"
	)
	aAppID, pauseID, idleID := rt.add(aApp), rt.add(pause), rt.add(idle)
	rt.useImages(aAppID)
	e.startController(controller.Config{})
	b := e.tenant("b")

	b.applyCache("found", false, aApp, pause, idle)
	if ic := b.waitDone("found", api.ReasonImageCacheCreate); ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.AlreadyPulled != 3 {
		t.Fatalf("found: %+v %+v, want 3 alreadypulled", ic.Status, ic.Status.Counts)
	}
	// With a pull secret the kubelet runs the pod, but the image was there.
	b.applyCache("with-secret", true, idle)
	if ic := b.waitDone("with-secret", api.ReasonImageCacheCreate); ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.Succeeded != 1 {
		t.Fatalf("with-secret: %+v %+v", ic.Status, ic.Status.Counts)
	}
	b.applyCache("own", false, bTool, shared)
	if ic := b.waitDone("own", api.ReasonImageCacheCreate); ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.Succeeded != 2 {
		t.Fatalf("own: %+v %+v", ic.Status, ic.Status.Counts)
	}
	bToolID, sharedID := rt.fake.Image(bTool).GetId(), rt.fake.Image(shared).GetId()
	// Tenant A's pod starts on the image B pulled.
	rt.useImages(aAppID, sharedID)

	b.purge("found")
	ic := b.waitDone("found", api.ReasonImageCachePurge)
	if ic.Status.Status != api.ActionStatusSucceeded {
		t.Errorf("purge of found: %+v", ic.Status)
	}
	for img, r := range b.results(n, ic) {
		if r.Reason != "NotPulledByCache" || !strings.Contains(r.Message, "found it present") {
			t.Errorf("purge of found, %s: %+v, want not removed: found present", img, r)
		}
	}
	if !strings.Contains(ic.Status.Message, "found it present") {
		t.Errorf("purge message %q does not say why the images stay", ic.Status.Message)
	}

	b.purge("own")
	ic = b.waitDone("own", api.ReasonImageCachePurge)
	got := b.results(n, ic)
	if r := got[bTool]; r.Status != "succeeded" || r.Reason != "" || r.Message != "removed from the runtime" {
		t.Errorf("purge of own, %s: %+v, want removed", bTool, r)
	}
	if r := got[shared]; r.Status != "succeeded" || !strings.HasPrefix(r.Message, "kept: in use by a container") {
		t.Errorf("purge of own, %s: %+v, want kept: in use", shared, r)
	}

	b.delete("found")
	b.delete("with-secret")
	b.delete("own")
	// Only the image b pulled that a container still uses waits to go.
	e.waitFor("b's caches gone from the spec, shared:1 alone waiting in the purge list", func() bool {
		ni := e.nodeImages(n)
		return ni != nil && len(ni.Spec.Images) == 0 && len(ni.Spec.Purge) == 1 && ni.Spec.Purge[0].Image == shared &&
			ni.Status.Agent != nil && ni.Status.Agent.ObservedGeneration >= ni.Generation
	})
	for name, id := range map[string]string{aApp: aAppID, pause: pauseID, idle: idleID, shared: sharedID} {
		if rt.fake.Image(id) == nil {
			t.Errorf("%s (%s) was removed by tenant b", name, id)
		}
	}
	if rt.fake.Image(bToolID) != nil {
		t.Errorf("%s, pulled by b's cache, is still there", bTool)
	}
	if diff := slices.Compare([]string{bToolID}, rt.removed()); diff != 0 {
		t.Errorf("RemoveImage calls %q, want only %s", rt.removed(), bToolID)
	}
	// Tenant A's pod on shared:1 ends: b's pull of it goes now.
	rt.useImages(aAppID)
	e.emptied(n)
	if rt.fake.Image(sharedID) != nil || rt.fake.Image(aAppID) == nil {
		t.Errorf("after the container ended: shared:1 present %v (want gone), a-app present %v (want kept)",
			rt.fake.Image(sharedID) != nil, rt.fake.Image(aAppID) != nil)
	}
}

// Two tenants' caches name one image in two spellings, and a tag pair of
// one content: deleting the cache that pulled them leaves the images the
// other keeps, and the other cache stays Succeeded (an update finds them
// present). The old agent removed docker.io/library/busybox:1.36 on the
// purge of busybox:1.36.
func TestTenantPurgesCompareImageIDs(t *testing.T) {
	e := newEnv(t)
	n := e.addNode("n", true)
	rt := e.startRuntime(n)
	// s:stable is the content of s:v1: its pull yields s:v1's image, and
	// the kubelet reports it with s:v1's repository digest.
	const stable, v1 = "registry.test/public/s:stable", "registry.test/public/s:v1"
	e.mu.Lock()
	e.content[stable] = v1
	e.mu.Unlock()
	e.kubelet.SetImageID(func(node, image string) string {
		if image == stable {
			return repoDigest(v1)
		}
		return repoDigest(image)
	})
	e.startController(controller.Config{})
	b, k := e.tenant("b"), e.tenant("k")

	b.applyCache("puller", false, "busybox:1.36", stable)
	if ic := b.waitDone("puller", api.ReasonImageCacheCreate); ic.Status.Counts.Succeeded != 2 {
		t.Fatalf("puller: %+v %+v, want both pulled", ic.Status, ic.Status.Counts)
	}
	busyID := rt.fake.Image("docker.io/library/busybox:1.36").GetId()
	v1ID := rt.fake.Image(v1).GetId()
	if busyID == "" || v1ID == "" {
		t.Fatal("the pre-pulls did not fill the runtime")
	}
	k.applyCache("keeper", false, "docker.io/library/busybox:1.36", v1)
	if ic := k.waitDone("keeper", api.ReasonImageCacheCreate); ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.AlreadyPulled != 2 {
		t.Fatalf("keeper: %+v %+v, want both found present", ic.Status, ic.Status.Counts)
	}

	b.delete("puller")
	e.waitFor("b's purges answered by the agent (or an image of k's gone)", func() bool {
		if rt.fake.Image(busyID) == nil || rt.fake.Image(v1ID) == nil {
			return true
		}
		ni := e.nodeImages(n)
		return ni != nil && len(ni.Spec.Purge) == 0 && len(ni.Spec.Images) == 2 &&
			ni.Status.Agent != nil && ni.Status.Agent.ObservedGeneration >= ni.Generation
	})
	for name, id := range map[string]string{"busybox:1.36": busyID, "s:v1": v1ID} {
		if rt.fake.Image(id) == nil {
			t.Errorf("%s (%s), kept by k's cache in another spelling or tag, was removed", name, id)
		}
	}
	if rm := rt.removed(); len(rm) != 0 {
		t.Errorf("RemoveImage calls %q, want none", rm)
	}
	if ic := k.cache("keeper"); ic.Status.Status != api.ActionStatusSucceeded {
		t.Errorf("keeper after b's delete: %+v", ic.Status)
	}
	k.applyCache("keeper", false, "docker.io/library/busybox:1.36", v1, "registry.test/public/extra:1")
	ic := k.waitDone("keeper", api.ReasonImageCacheUpdate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.AlreadyPulled != 2 {
		t.Errorf("keeper updated after b's delete: %+v %+v, want Succeeded with its two images present", ic.Status, ic.Status.Counts)
	}
}

// A purge and a delete while the node's agent is away are remembered: the
// purge stays Processing, saying the agent is away, never Succeeded while
// the image is there, and both are done when the agent returns. The old
// controller failed the purge at once and forgot the delete's removals.
func TestTenantPurgeWaitsForAwayAgent(t *testing.T) {
	e := newEnv(t)
	n := e.addNode("n", true)
	rt := e.startRuntime(n)
	e.startController(controller.Config{AgentTimeout: 3 * time.Second})
	b := e.tenant("b")
	const one, two = "registry.test/public/one:1", "registry.test/public/two:1"
	b.applyCache("purged", false, one)
	b.applyCache("deleted", false, two)
	b.waitDone("purged", api.ReasonImageCacheCreate)
	b.waitDone("deleted", api.ReasonImageCacheCreate)
	oneID, twoID := rt.fake.Image(one).GetId(), rt.fake.Image(two).GetId()

	rt.stopAgent()
	b.purge("purged")
	b.delete("deleted")
	e.waitFor("the purge waits, saying the agent is away, and both removals are remembered", func() bool {
		ic := b.cache("purged")
		if ic.Status.Reason == api.ReasonImageCachePurge && ic.Status.Status != api.ActionStatusProcessing {
			t.Fatalf("purge answered %s while the agent is away: %+v", ic.Status.Status, ic.Status)
		}
		ni := e.nodeImages(n)
		return ic.Status.Reason == api.ReasonImageCachePurge && strings.Contains(ic.Status.Message, "agent of 1 node(s) is away") &&
			ni != nil && len(ni.Spec.Purge) == 2
	})
	if rt.fake.Image(oneID) == nil || rt.fake.Image(twoID) == nil {
		t.Fatal("an image went while no agent ran")
	}

	rt.startAgent()
	ic := b.waitDone("purged", api.ReasonImageCachePurge)
	if r := b.results(n, ic)[one]; ic.Status.Status != api.ActionStatusSucceeded || r.Message != "removed from the runtime" {
		t.Errorf("purge after the agent returned: %+v, result %+v", ic.Status, r)
	}
	e.emptied(n)
	if rt.fake.Image(oneID) != nil || rt.fake.Image(twoID) != nil {
		t.Errorf("removals not done after the agent returned: one %v, two %v", rt.fake.Image(oneID) != nil, rt.fake.Image(twoID) != nil)
	}
}

package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/controller"
	"github.com/pullrecords/pullrecords/cluster/internal/standin"
	"github.com/pullrecords/pullrecords/cri/critest"
)

func TestMain(m *testing.M) {
	os.Exit(apiservertest.Main(m, apiservertest.Options{}))
}

// repoFile is a path in the repository, from this test file.
func repoFile(parts ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, parts...)...)
}

var installOnce sync.Once

// install applies the CRDs and the deploy manifests (namespace, RBAC,
// admission policies) once per test binary: what a cluster admin applies.
func install(t testing.TB) {
	t.Helper()
	apiservertest.Need(t)
	var err error
	installOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = apiservertest.Apply(ctx, apiservertest.Current().Admin,
			repoFile("deploy", "crds", "imagecaches.kubefledged.io.yaml"),
			repoFile("deploy", "crds", "nodeimages.pullrecords.io.yaml"),
			repoFile("deploy", "cluster", "namespace.yaml"),
			repoFile("deploy", "cluster", "rbac.yaml"),
			repoFile("deploy", "cluster", "admission.yaml"))
		if err == nil {
			err = setNoopImage(ctx, testNoopImage)
		}
		if err == nil {
			err = waitForPolicies(ctx)
		}
	})
	if err != nil {
		t.Fatalf("installing the manifests: %v", err)
	}
}

// env is one test's cluster: its own namespace, nodes and selector label,
// a stand-in kubelet and a controller running under its RBAC identity.
type env struct {
	t       testing.TB
	ctx     context.Context
	admin   kubernetes.Interface
	dyn     dynamic.Interface
	ns      string
	label   string // nodes of this test carry label label=yes
	kubelet *standin.Kubelet
	ctlCfg  *rest.Config

	mu       sync.Mutex
	password map[string]string // secret name -> accepted for private images
	// runtimes are the fake CRI runtimes of the nodes that run an agent
	// (startAgent): a successful pull there adds the image.
	runtimes map[string]*critest.ImageService
	// content maps an image to the one whose content a pull of it yields
	// (a tag pair of one digest), for runtimes.
	content map[string]string
	stop    context.CancelFunc
	done    chan error
}

func newEnv(t *testing.T) *env { return newEnvNamed(t, t.Name()) }

// newBenchEnv is newEnv for a benchmark run; suffix tells runs apart (a
// namespace is never finalized here, so names are not reused).
func newBenchEnv(b *testing.B, suffix string) *env {
	return newEnvNamed(b, fmt.Sprintf("%s-%s-%d", b.Name(), suffix, time.Now().UnixNano()%1e6))
}

func newEnvNamed(t testing.TB, name string) *env {
	t.Helper()
	install(t)
	s := apiservertest.Need(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	name = strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(name))
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	name = strings.Trim(name, "-")
	e := &env{t: t, ctx: ctx, admin: kubernetes.NewForConfigOrDie(controller.Protobuf(s.Admin)), dyn: dynamic.NewForConfigOrDie(s.Admin),
		ns: name, label: "test-" + name, password: map[string]string{"regcred": "ok"}, runtimes: map[string]*critest.ImageService{}, content: map[string]string{}}
	if _, err := e.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var err error
	e.kubelet, err = standin.Start(ctx, e.admin, "app.kubernetes.io/managed-by=pullrecords-controller", 4, e.decide)
	if err != nil {
		t.Fatal(err)
	}
	e.ctlCfg, err = s.ServiceAccountConfig(ctx, "pullrecords-system", "pullrecords-controller", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cleanup)
	return e
}

// decide is the stand-in's registry: images under "private/" need a pull
// secret whose name the registry accepts; others are public.
func (e *env) decide(node, image string, secrets []corev1.LocalObjectReference) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ok := !strings.Contains(image, "private/")
	for _, s := range secrets {
		ok = ok || e.password[s.Name] == "ok"
	}
	if ok {
		if rt := e.runtimes[node]; rt != nil {
			if c := e.content[image]; c != "" {
				image = c
			}
			if _, err := rt.AddImage(image); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("failed to pull and unpack image %q: failed to resolve reference: pull access denied, 401 Unauthorized", image)
}

func (e *env) startController(cfg controller.Config) {
	e.t.Helper()
	cfg.Kube = kubernetes.NewForConfigOrDie(controller.Protobuf(e.ctlCfg))
	cfg.Dynamic = dynamic.NewForConfigOrDie(e.ctlCfg)
	if cfg.NoopImage == "" {
		cfg.NoopImage = testNoopImage
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = -1
	}
	if cfg.PullDeadline == 0 {
		cfg.PullDeadline = time.Minute
	}
	c, err := controller.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.stop = cancel
	e.done = make(chan error, 1)
	go func() { e.done <- c.Run(ctx) }()
}

func (e *env) stopController() {
	e.t.Helper()
	if e.stop == nil {
		return
	}
	e.stop()
	if err := <-e.done; err != nil {
		e.t.Errorf("controller: %v", err)
	}
	e.stop = nil
}

func (e *env) cleanup() {
	e.stopController()
	ctx := context.Background()
	list, _ := e.dyn.Resource(api.ImageCacheResource).Namespace(e.ns).List(ctx, metav1.ListOptions{})
	if list != nil {
		for _, ic := range list.Items {
			_ = e.dyn.Resource(api.ImageCacheResource).Namespace(e.ns).Delete(ctx, ic.GetName(), metav1.DeleteOptions{})
		}
	}
	_ = e.admin.CoreV1().Pods(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	nodes, _ := e.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: e.label})
	if nodes != nil {
		for _, n := range nodes.Items {
			_ = e.admin.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			_ = e.dyn.Resource(api.NodeImagesResource).Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
	}
}

// addNode registers a node of this test; selected nodes carry label=yes.
func (e *env) addNode(name string, selected bool, imagesInStatus ...string) string {
	e.t.Helper()
	full := e.ns + "-" + name
	labels := map[string]string{e.label: "no", "kubernetes.io/hostname": full}
	if selected {
		labels[e.label] = "yes"
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: full, Labels: labels}}
	created, err := e.admin.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	created.Status.NodeInfo.ContainerRuntimeVersion = "containerd://1.6.20"
	// Ready, as a node with a running kubelet is: placement skips the others.
	created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
	for _, img := range imagesInStatus {
		created.Status.Images = append(created.Status.Images, corev1.ContainerImage{Names: []string{img}, SizeBytes: 1000})
	}
	if _, err := e.admin.CoreV1().Nodes().UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return full
}

func (e *env) setLabel(node string, selected bool) {
	e.t.Helper()
	v := "no"
	if selected {
		v = "yes"
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, e.label, v)
	if _, err := e.admin.CoreV1().Nodes().Patch(e.ctx, node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// applyCache creates or replaces an ImageCache from YAML (the spec part),
// as kubectl apply would.
func (e *env) applyCache(name, specYAML string) {
	e.t.Helper()
	e.applyCacheIn(e.ns, name, specYAML)
}

// applyCacheIn is applyCache into namespace ns (another tenant's).
func (e *env) applyCacheIn(ns, name, specYAML string) {
	e.t.Helper()
	doc := fmt.Sprintf("apiVersion: kubefledged.io/v1alpha2\nkind: ImageCache\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n%s", name, ns, specYAML)
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		e.t.Fatalf("bad test YAML: %v\n%s", err, doc)
	}
	data, _ := yaml.YAMLToJSON([]byte(doc))
	force := true
	if _, err := e.dyn.Resource(api.ImageCacheResource).Namespace(ns).Patch(e.ctx, name, "application/apply-patch+yaml", data,
		metav1.PatchOptions{FieldManager: "kubectl", Force: &force}); err != nil {
		e.t.Fatalf("applying ImageCache %s/%s: %v", ns, name, err)
	}
}

func (e *env) annotate(name, key string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, key)
	if _, err := e.dyn.Resource(api.ImageCacheResource).Namespace(e.ns).Patch(e.ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) cache(name string) *api.ImageCache {
	e.t.Helper()
	u, err := e.dyn.Resource(api.ImageCacheResource).Namespace(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var ic api.ImageCache
	if err := api.FromUnstructured(u, &ic); err != nil {
		e.t.Fatal(err)
	}
	return &ic
}

func (e *env) nodeImages(node string) *api.NodeImages {
	e.t.Helper()
	u, err := e.dyn.Resource(api.NodeImagesResource).Get(e.ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var ni api.NodeImages
	if err := api.FromUnstructured(u, &ni); err != nil {
		e.t.Fatal(err)
	}
	return &ni
}

// waitFor polls until cond holds; the deadline is generous (the state is
// eventual, not timed) and the failure shows the last cache status seen.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("never reached: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitDone waits until the cache's action for its current generation has
// finished and returns it.
func (e *env) waitDone(name string, reason string) *api.ImageCache {
	e.t.Helper()
	var last *api.ImageCache
	deadline := time.Now().Add(90 * time.Second)
	for {
		last = e.cache(name)
		st := last.Status
		if st.Status != "" && st.Status != api.ActionStatusProcessing && st.Reason == reason && st.ObservedGeneration == last.Generation {
			return last
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("cache %s never finished a %s action; last status %+v counts %+v", name, reason, st, st.Counts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) managedPods() []corev1.Pod {
	e.t.Helper()
	pods, err := e.admin.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=pullrecords-controller"})
	if err != nil {
		e.t.Fatal(err)
	}
	return pods.Items
}

// testNoopImage is the no-op image of the tests' controllers; install
// writes it into admission's parameter, as an admin deploying the
// controller does with its --noop-image.
const testNoopImage = "registry.test/pullrecords:test"

// setNoopImage sets data.noopImage of the ConfigMap admission.yaml's
// pre-pull policy reads.
func setNoopImage(ctx context.Context, image string) error {
	kube := kubernetes.NewForConfigOrDie(apiservertest.Current().Admin)
	patch := fmt.Sprintf(`{"data":{"noopImage":%q}}`, image)
	_, err := kube.CoreV1().ConfigMaps("pullrecords-system").Patch(ctx, "pullrecords-prepull", "application/merge-patch+json",
		[]byte(patch), metav1.PatchOptions{})
	return err
}

// waitForPolicies waits until the API server enforces the admission
// policies: it loads new ones asynchronously, about a second after they are
// created. The probe is a dry-run pod the controller may not create.
func waitForPolicies(ctx context.Context) error {
	s := apiservertest.Current()
	cfg, err := s.ServiceAccountConfig(ctx, "pullrecords-system", "pullrecords-controller", "")
	if err != nil {
		return err
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: "pullrecords-system"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x:1"}}}}
	// An unlabelled pod the delete policy must keep the controller from
	// deleting (probed with dry-run deletes).
	admin := kubernetes.NewForConfigOrDie(s.Admin)
	if _, err := admin.CoreV1().Pods("pullrecords-system").Create(ctx, probe, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	created, deleted := false, false
	for {
		if !created {
			_, err = kube.CoreV1().Pods("pullrecords-system").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			created = err != nil && strings.Contains(err.Error(), "controlled by an ImageCache")
		}
		if !deleted {
			err = kube.CoreV1().Pods("pullrecords-system").Delete(ctx, probe.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			deleted = err != nil && strings.Contains(err.Error(), "may delete only its own")
		}
		if created && deleted {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("admission policies not enforced (last probe: %v): %w", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

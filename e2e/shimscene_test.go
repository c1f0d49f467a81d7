//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/nodetest"
)

// The shim tests' node names; the API server issues their kubelet tokens
// at start, and each test has nodes of its own (a node of an earlier test
// would still run its pods).
var shimNodeNames = []string{"bypass-1", "bypass-2", "shim-1", "shim-2", "kill-1", "down-1"}

// sceneTimeout bounds starting the shared API server and registries.
const sceneTimeout = 3 * time.Minute

// shimScene is what the shim tests share: one API server, the origin
// registry (htpasswd, the private image), an open registry for public
// images (htpasswd is registry-wide in docker-registry, so the public image
// has an open origin of its own), and the mirror: an open registry holding
// a copy of the private image under the same repository (docker-registry
// 2.8.2's pull-through cache sends no credentials to an htpasswd remote).
type shimScene struct {
	srv    *apiservertest.Server
	cs     kubernetes.Interface
	auth   *nodetest.BasicAuth
	origin *nodetest.Registry
	public *nodetest.Registry
	mirror *nodetest.Registry

	pauseFiles   map[string]nodetest.File
	sandbox      string // on public
	private      string // origin.Host/tenant-a/app:v1
	publicImage  string // public.Host/public/app:v1
	privateRepo  string // tenant-a/app
	privateFiles map[string]nodetest.File
}

var (
	sceneOnce sync.Once
	scene     *shimScene
	sceneErr  error
	sceneStop []func()
)

// TestMain stops what the shim tests shared (the API server removes its
// directory); every process dies with the test binary anyway.
func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(sceneStop) - 1; i >= 0; i-- {
		sceneStop[i]()
	}
	os.Exit(code)
}

// sharedScene starts the scene once per test binary and fails t when it
// cannot run here.
func sharedScene(t *testing.T) *shimScene {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the shim tests start containerd and kubelets and must run as root")
	}
	sceneOnce.Do(func() { scene, sceneErr = startScene() })
	if sceneErr != nil {
		t.Fatal(sceneErr)
	}
	return scene
}

func startScene() (*shimScene, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sceneTimeout)
	defer cancel()
	if _, err := apiservertest.BinDir(); err != nil {
		return nil, err
	}
	srv, err := apiservertest.Start(ctx, apiservertest.Options{NodeNames: shimNodeNames})
	if err != nil {
		return nil, err
	}
	sceneStop = append(sceneStop, func() { _ = srv.Stop() })
	s := &shimScene{srv: srv, auth: &nodetest.BasicAuth{Username: "tenant-a-robot", Password: "pw-" + randomHex(8)}, privateRepo: "tenant-a/app"}
	if s.cs, err = kubernetes.NewForConfig(srv.Admin); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shimscene-")
	if err != nil {
		return nil, err
	}
	sceneStop = append(sceneStop, func() { _ = os.RemoveAll(dir) })
	start := func(name string, auth *nodetest.BasicAuth) (*nodetest.Registry, error) {
		r, err := nodetest.StartRegistry(ctx, filepath.Join(dir, name), auth)
		if err == nil {
			sceneStop = append(sceneStop, r.Stop)
		}
		return r, err
	}
	if s.origin, err = start("origin", s.auth); err != nil {
		return nil, err
	}
	if s.public, err = start("public", nil); err != nil {
		return nil, err
	}
	if s.mirror, err = start("mirror", nil); err != nil {
		return nil, err
	}
	pauseBin := filepath.Join(dir, "pause")
	if err := nodetest.BuildStatic(ctx, "../cluster/internal/cmd/pause", pauseBin); err != nil {
		return nil, err
	}
	pause, err := os.ReadFile(pauseBin)
	if err != nil {
		return nil, err
	}
	s.pauseFiles = map[string]nodetest.File{"pause": {Data: pause, Mode: 0o755}}
	s.sandbox = s.public.Host + "/e2e/pause:v1"
	if _, err := nodetest.PushImage(ctx, s.public, s.sandbox, s.pauseFiles, []string{"/pause"}, nil); err != nil {
		return nil, err
	}
	s.publicImage = s.public.Host + "/public/app:v1"
	if _, err := nodetest.PushImage(ctx, s.public, s.publicImage, withFile(s.pauseFiles, "etc/which", "public"), []string{"/pause"}, nil); err != nil {
		return nil, err
	}
	s.privateFiles = withFile(s.pauseFiles, "etc/which", "tenant-a private "+randomHex(4))
	s.private = s.origin.Host + "/" + s.privateRepo + ":v1"
	d1, err := nodetest.PushImage(ctx, s.origin, s.private, s.privateFiles, []string{"/pause"}, s.auth)
	if err != nil {
		return nil, err
	}
	d2, err := nodetest.PushImage(ctx, s.mirror, s.privateRepo+":v1", s.privateFiles, []string{"/pause"}, nil)
	if err != nil {
		return nil, err
	}
	if d1 != d2 {
		return nil, fmt.Errorf("mirror copy has digest %s, origin %s", d2, d1)
	}
	for _, ns := range []string{"tenant-a", "tenant-b", "tenant-c"} {
		if _, err := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if err := s.createSecret(ctx, "tenant-a", "regcred", s.origin.Host); err != nil {
		return nil, err
	}
	return s, nil
}

func withFile(files map[string]nodetest.File, name, content string) map[string]nodetest.File {
	out := map[string]nodetest.File{name: {Data: []byte(content + "\n")}}
	for k, v := range files {
		out[k] = v
	}
	return out
}

// createSecret creates a docker-registry Secret with the origin's user for
// the given registry hosts.
func (s *shimScene) createSecret(ctx context.Context, ns, name string, hosts ...string) error {
	return s.createSecretFor(ctx, ns, name, s.auth, hosts...)
}

// createSecretFor creates a docker-registry Secret holding auth's user for
// the given registry hosts.
func (s *shimScene) createSecretFor(ctx context.Context, ns, name string, auth *nodetest.BasicAuth, hosts ...string) error {
	auths := map[string]any{}
	for _, h := range hosts {
		auths[h] = map[string]string{
			"username": auth.Username, "password": auth.Password,
			"auth": base64.StdEncoding.EncodeToString([]byte(auth.Username + ":" + auth.Password)),
		}
	}
	cfg, _ := json.Marshal(map[string]any{"auths": auths})
	_, err := s.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}, metav1.CreateOptions{})
	return err
}

// mirrorHosts makes the mirror the mirror of each given registry host.
func (s *shimScene) mirrorHosts(hosts ...string) []nodetest.RegistryHost {
	var out []nodetest.RegistryHost
	for _, h := range hosts {
		out = append(out, nodetest.RegistryHost{Host: h, Server: "http://" + h, Mirrors: []string{s.mirror.URL()}})
	}
	return out
}

// startNodes starts the named nodes at the same time, with the mirror in
// front of the origin, and the shim in front of containerd when shims is
// not nil (one per node, in shims[name]). Everything stops in t.Cleanup.
func (s *shimScene) startNodes(t *testing.T, ctx context.Context, names []string, mirrored []string, shims map[string]*shimProc) map[string]*nodetest.Node {
	t.Helper()
	nodes := map[string]*nodetest.Node{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, name := range names {
		opts := nodetest.NodeOptions{
			Name:               name,
			Server:             s.srv,
			Kubelet:            filepath.Join(mustBinDir(t), "kubelet"),
			SandboxImage:       s.sandbox,
			InsecureRegistries: append([]string{s.public.Host}, mirrored...),
			RegistryHosts:      s.mirrorHosts(mirrored...),
		}
		if shims != nil {
			opts.RuntimeEndpoint = func(ctx context.Context, containerd string) (string, error) {
				p, err := startShim(t, ctx, name, containerd, append([]string{s.public.Host}, mirrored...))
				if err != nil {
					return "", err
				}
				mu.Lock()
				shims[name] = p
				mu.Unlock()
				return p.endpoint, nil
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := nodetest.StartNode(ctx, opts)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			nodes[name] = n
		}()
	}
	wg.Wait()
	for _, n := range nodes {
		t.Cleanup(n.Stop)
	}
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return nodes
}

func mustBinDir(t *testing.T) string {
	t.Helper()
	dir, err := apiservertest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// podSpec describes a test pod.
type podSpec struct {
	ns, name, node, image, secret string
	policy                        corev1.PullPolicy // default IfNotPresent
	restart                       corev1.RestartPolicy
	args                          []string
}

// createPod creates the pod (deleted in t.Cleanup).
func (s *shimScene) createPod(t *testing.T, ctx context.Context, p podSpec) {
	t.Helper()
	if p.policy == "" {
		p.policy = corev1.PullIfNotPresent
	}
	if p.restart == "" {
		p.restart = corev1.RestartPolicyNever
	}
	if p.args == nil {
		p.args = []string{"-exit-after", "0s"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name},
		Spec: corev1.PodSpec{
			NodeName:                      p.node,
			RestartPolicy:                 p.restart,
			AutomountServiceAccountToken:  new(bool),
			EnableServiceLinks:            new(bool),
			TerminationGracePeriodSeconds: new(int64),
			Containers:                    []corev1.Container{{Name: "app", Image: p.image, ImagePullPolicy: p.policy, Args: p.args}},
		},
	}
	if p.secret != "" {
		pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: p.secret}}
	}
	if _, err := s.cs.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.cs.CoreV1().Pods(p.ns).Delete(context.Background(), p.name, *metav1.NewDeleteOptions(0))
	})
}

// deletePodAndWait deletes the pod at once and waits (every 200 ms, up to
// 2 minutes and ctx) until the API server no longer has it, which is after
// its kubelet stopped working on it.
func (s *shimScene) deletePodAndWait(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	if err := s.cs.CoreV1().Pods(ns).Delete(ctx, name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatalf("deleting pod %s/%s: %v", ns, name, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := s.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("pod %s/%s still there 2 minutes after its deletion (err %v)", ns, name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPod polls the pod (every 200 ms, up to 2 minutes and ctx) until done
// says it is finished; done may fail the test.
func (s *shimScene) waitPod(t *testing.T, ctx context.Context, n *nodetest.Node, ns, name, want string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	t0 := time.Now()
	deadline := t0.Add(2 * time.Minute)
	for {
		pod, err := s.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && done(pod) {
			t.Logf("pod %s/%s: %s after %v", ns, name, want, time.Since(t0).Round(time.Millisecond))
			return pod
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var status []byte
			if pod != nil {
				status, _ = json.MarshalIndent(pod.Status, "", "  ")
			}
			t.Fatalf("pod %s/%s: not %s in time (err %v); status:\n%s\n%s", ns, name, want, err, status, lastLines(n.KubeletLog(), 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func succeeded(t *testing.T) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		if p.Status.Phase == corev1.PodFailed {
			status, _ := json.MarshalIndent(p.Status, "", "  ")
			t.Fatalf("pod %s/%s failed:\n%s", p.Namespace, p.Name, status)
		}
		return p.Status.Phase == corev1.PodSucceeded
	}
}

// pullRefused holds once the pod's container waits in ErrImagePull or
// ImagePullBackOff, and fails the test if the container ever ran.
func pullRefused(t *testing.T) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running != nil || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil || p.Status.Phase == corev1.PodSucceeded {
				t.Fatalf("pod %s/%s ran the private image without the right credential: %+v", p.Namespace, p.Name, c.State)
			}
			if w := c.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				return true
			}
		}
		return false
	}
}

// podEvents returns the messages of the pod's events with the reason.
func (s *shimScene) podEvents(t *testing.T, ctx context.Context, ns, name, reason string) []string {
	t.Helper()
	evs, err := s.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// refusalNaming waits until a Failed event of the pod carries the error of
// a refused pull of image that names host and one of reasons outside the
// image reference itself (which names the host anyway), and returns it.
func (s *shimScene) refusalNaming(t *testing.T, ctx context.Context, ns, name, image, host string, reasons ...string) string {
	t.Helper()
	var last []string
	for i := 0; i < 300; i++ {
		last = s.podEvents(t, ctx, ns, name, "Failed")
		for _, m := range last {
			desc := strings.ReplaceAll(m, image, "")
			if !strings.Contains(desc, host) {
				continue
			}
			for _, r := range reasons {
				if strings.Contains(strings.ToLower(desc), r) {
					return m
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s/%s: no Failed event whose CRI error names %s and one of %q; events: %q", ns, name, host, reasons, last)
	return ""
}

// since returns the registry's requests after the first skip ones.
func since(t *testing.T, r *nodetest.Registry, skip int) []nodetest.RegistryRequest {
	t.Helper()
	got, err := r.Requests()
	if err != nil {
		t.Fatal(err)
	}
	if skip > len(got) {
		t.Fatalf("registry %s: log shrank (%d requests, had %d)", r.Host, len(got), skip)
	}
	return got[skip:]
}

func countRequests(t *testing.T, r *nodetest.Registry) int {
	t.Helper()
	return len(since(t, r, 0))
}

// blobReads counts successful blob GETs by containerd.
func blobReads(rs []nodetest.RegistryRequest) int {
	n := 0
	for _, r := range rs {
		if r.Method == http.MethodGet && r.IsBlob() && r.Status == http.StatusOK && strings.HasPrefix(r.UserAgent, "containerd/") {
			n++
		}
	}
	return n
}

// pulledRecordMapping reads the node's kubelet pulled records and returns
// the credential mapping entry for the image name (repository without tag),
// from whichever record holds it.
func pulledRecordMapping(t *testing.T, n *nodetest.Node, imageName string) (map[string]any, string) {
	t.Helper()
	dir := filepath.Join(n.RootDir, "image_manager", "pulled")
	var found map[string]any
	var raw string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == dir {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var rec struct {
			CredentialMapping map[string]map[string]any `json:"credentialMapping"`
		}
		if json.Unmarshal(data, &rec) != nil {
			return nil
		}
		if m, ok := rec.CredentialMapping[imageName]; ok {
			found, raw = m, string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, raw
}

package nodetest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/nodetest"
)

// TestTwoNodes starts an API server, two registries and two real nodes and
// checks that the nodes run pods and that KEP-2535 holds on them: a private
// image pulled on node-a with a pod's secret is recorded with that secret,
// a pod of another namespace without it cannot use the cached image, also
// after a kubelet restart, and node-b, which ran nothing, has nothing pulled.
func TestTwoNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestTwoNodes starts containerd and kubelets and must run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)

	bin, err := apiservertest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	srv, err := apiservertest.Start(ctx, apiservertest.Options{NodeNames: []string{"node-a", "node-b"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	t.Logf("API server ready in %v", time.Since(t0).Round(time.Millisecond))

	auth := &nodetest.BasicAuth{Username: "tenant-a-robot", Password: "pw-" + fmt.Sprint(time.Now().UnixNano())}
	open, err := nodetest.StartRegistry(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open.Stop)
	private, err := nodetest.StartRegistry(ctx, t.TempDir(), auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(private.Stop)

	pauseBin := filepath.Join(t.TempDir(), "pause")
	if err := nodetest.BuildStatic(ctx, "../internal/cmd/pause", pauseBin); err != nil {
		t.Fatal(err)
	}
	pause, err := os.ReadFile(pauseBin)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]nodetest.File{"pause": {Data: pause, Mode: 0o755}}
	sandboxImage := open.Host + "/nodetest/pause:v1"
	if _, err := nodetest.PushImage(ctx, open, sandboxImage, files, []string{"/pause"}, nil); err != nil {
		t.Fatal(err)
	}
	privateImage := private.Host + "/tenant-a/app:v1"
	files["etc/tenant"] = nodetest.File{Data: []byte("tenant-a\n")}
	if _, err := nodetest.PushImage(ctx, private, privateImage, files, []string{"/pause"}, auth); err != nil {
		t.Fatal(err)
	}

	// Two nodes, started at the same time.
	t0 = time.Now()
	nodes := map[string]*nodetest.Node{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, name := range []string{"node-a", "node-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := nodetest.StartNode(ctx, nodetest.NodeOptions{
				Name:               name,
				Server:             srv,
				Kubelet:            filepath.Join(bin, "kubelet"),
				SandboxImage:       sandboxImage,
				InsecureRegistries: []string{open.Host, private.Host},
				Labels:             map[string]string{"pullrecords.test/node": name},
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			nodes[name] = n
			t.Cleanup(n.Stop)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("2 nodes Ready in %v", time.Since(t0).Round(time.Millisecond))
	a, b := nodes["node-a"], nodes["node-b"]

	cs, err := kubernetes.NewForConfig(srv.Admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-a", "node-b"} {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Labels["pullrecords.test/node"]; got != name {
			t.Errorf("node %s: label pullrecords.test/node = %q, want %q", name, got, name)
		}
	}
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dockercfg, _ := json.Marshal(map[string]any{"auths": map[string]any{private.Host: map[string]string{
		"username": auth.Username, "password": auth.Password,
		"auth": base64.StdEncoding.EncodeToString([]byte(auth.Username + ":" + auth.Password)),
	}}})
	if _, err := cs.CoreV1().Secrets("tenant-a").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockercfg},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	newPod := func(ns, name, node string, secret bool, args ...string) *corev1.Pod {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{
				NodeName:                     node,
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: new(bool),
				EnableServiceLinks:           new(bool),
				Containers: []corev1.Container{{
					Name:            "app",
					Image:           privateImage,
					ImagePullPolicy: corev1.PullIfNotPresent,
					Args:            args,
				}},
			},
		}
		if secret {
			pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().Pods(ns).Delete(context.Background(), name, *metav1.NewDeleteOptions(0))
		})
		return created
	}
	exitNow := []string{"-exit-after", "0s"}
	// waitPod polls the pod until done says it is finished.
	waitPod := func(n *nodetest.Node, ns, name, want string, done func(*corev1.Pod) bool) {
		t.Helper()
		t0 := time.Now()
		deadline := time.Now().Add(90 * time.Second)
		for {
			pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && done(pod) {
				t.Logf("pod %s/%s: %s after %v", ns, name, want, time.Since(t0).Round(time.Millisecond))
				return
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				status, _ := json.MarshalIndent(pod.Status, "", "  ")
				t.Fatalf("pod %s/%s: not %s in time (err %v); status:\n%s\n%s", ns, name, want, err, status, tail(n.KubeletLog(), 40))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	succeeded := func(p *corev1.Pod) bool {
		if p.Status.Phase == corev1.PodFailed {
			status, _ := json.MarshalIndent(p.Status, "", "  ")
			t.Fatalf("pod %s/%s failed:\n%s", p.Namespace, p.Name, status)
		}
		return p.Status.Phase == corev1.PodSucceeded
	}
	pullDenied := func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil || cs.State.Terminated != nil {
				t.Fatalf("pod %s/%s without the secret ran the private image: %+v", p.Namespace, p.Name, cs.State)
			}
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				return true
			}
		}
		return false
	}

	// (a) With the secret: pulled, run, recorded with the secret.
	newPod("tenant-a", "with-secret", "node-a", true, exitNow...)
	waitPod(a, "tenant-a", "with-secret", "Succeeded", succeeded)
	records := pullRecords(t, a)
	found := false
	for _, r := range records {
		var doc any
		if err := json.Unmarshal([]byte(r[strings.Index(r, ": ")+2:]), &doc); err != nil {
			t.Errorf("node-a: pull record is not JSON: %v\n%s", err, r)
			continue
		}
		if mentionsSecret(doc, "tenant-a", "regcred") {
			found = true
		}
	}
	if !found {
		t.Fatalf("node-a: no pull record naming secret tenant-a/regcred under %s; records:\n%s", filepath.Join(a.RootDir, "image_manager", "pulled"), strings.Join(records, "\n"))
	}
	if !hasImage(t, a, privateImage) {
		t.Fatalf("node-a: containerd does not list %s after the pod ran", privateImage)
	}

	// (b) Another namespace without the secret, image cached on node-a:
	// the kubelet must not start it from the cache.
	newPod("tenant-b", "without-secret", "node-a", false, exitNow...)
	waitPod(a, "tenant-b", "without-secret", "ErrImagePull/ImagePullBackOff", pullDenied)

	// (c) node-b ran nothing and has nothing pulled.
	if r := pullRecords(t, b); len(r) != 0 {
		t.Errorf("node-b: pull records although no pod ran there:\n%s", strings.Join(r, "\n"))
	}
	if hasImage(t, b, privateImage) {
		t.Errorf("node-b: containerd lists %s although no pod ran there", privateImage)
	}

	// After a kubelet restart the record still gates the cached image.
	t0 = time.Now()
	a.StopKubelet()
	if err := a.StartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("node-a: kubelet restarted in %v", time.Since(t0).Round(time.Millisecond))
	newPod("tenant-b", "without-secret-2", "node-a", false, exitNow...)
	waitPod(a, "tenant-b", "without-secret-2", "ErrImagePull/ImagePullBackOff", pullDenied)
	newPod("tenant-a", "with-secret-2", "node-a", true, exitNow...)
	waitPod(a, "tenant-a", "with-secret-2", "Succeeded", succeeded)

	// Stop cleans up a node with a container still running.
	newPod("tenant-a", "running", "node-a", true)
	waitPod(a, "tenant-a", "running", "Running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning
	})
	socket := strings.TrimPrefix(a.CRIEndpoint, "unix://")
	shims := pidsWithArg(socket)
	if len(shims) == 0 {
		t.Fatalf("node-a: no containerd shim runs with -address %s", socket)
	}
	podProcs := childrenOf(shims)
	if len(podProcs) == 0 {
		t.Fatal("node-a: the shims have no child processes although a pod runs")
	}
	if _, err := net.InterfaceByName(a.Bridge); err != nil {
		t.Errorf("node-a: bridge %s missing although a pod runs: %v", a.Bridge, err)
	}
	t0 = time.Now()
	a.Stop()
	a.Stop() // idempotent
	t.Logf("node-a: stopped with a pod running in %v", time.Since(t0).Round(time.Millisecond))
	for _, pid := range append(shims, podProcs...) {
		if alive(pid) {
			t.Errorf("node-a: process %d (shim or pod process) alive after Stop", pid)
		}
	}
	if pids := pidsWithSubstring(a.Dir); len(pids) > 0 {
		t.Errorf("node-a: processes %v still refer to %s after Stop", pids, a.Dir)
	}
	if mounts, _ := os.ReadFile("/proc/self/mounts"); bytes.Contains(mounts, []byte(a.Dir)) {
		t.Errorf("node-a: mounts under %s after Stop", a.Dir)
	}
	if _, err := net.InterfaceByName(a.Bridge); err == nil {
		t.Errorf("node-a: bridge %s still exists after Stop", a.Bridge)
	}
	if _, err := os.Stat(a.Dir); !os.IsNotExist(err) {
		t.Errorf("node-a: %s still exists after Stop (%v)", a.Dir, err)
	}
}

// pidsWithArg returns the processes with arg as one of their arguments.
func pidsWithArg(arg string) []int {
	var out []int
	for pid, args := range cmdlines() {
		for _, a := range args {
			if a == arg {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// pidsWithSubstring returns the processes with s in their command line.
func pidsWithSubstring(s string) []int {
	var out []int
	for pid, args := range cmdlines() {
		if strings.Contains(strings.Join(args, " "), s) {
			out = append(out, pid)
		}
	}
	return out
}

func cmdlines() map[int][]string {
	out := map[int][]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && len(data) > 0 {
			out[pid] = strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		}
	}
	return out
}

// childrenOf returns the direct children of the given processes.
func childrenOf(parents []int) []int {
	isParent := map[int]bool{}
	for _, p := range parents {
		isParent[p] = true
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _ := statField(pid, 1); isParent[ppid] {
			out = append(out, pid)
		}
	}
	return out
}

// statField returns field i (0: state, 1: ppid) after the command name of
// /proc/pid/stat, as a number, and the state letter.
func statField(pid, i int) (int, string) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1, ""
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	n, _ := strconv.Atoi(f[i])
	return n, f[0]
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	_, state := statField(pid, 0)
	return state != "" && state != "Z" && state != "X"
}

// mentionsSecret reports whether some JSON object in doc has "namespace"
// ns and "name" name, as the kubelet's records of pull secrets do.
func mentionsSecret(doc any, ns, name string) bool {
	switch v := doc.(type) {
	case map[string]any:
		if v["namespace"] == ns && v["name"] == name {
			return true
		}
		for _, e := range v {
			if mentionsSecret(e, ns, name) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if mentionsSecret(e, ns, name) {
				return true
			}
		}
	}
	return false
}

// pullRecords returns the contents of the files under the node's
// image_manager/pulled directory.
func pullRecords(t *testing.T, n *nodetest.Node) []string {
	t.Helper()
	var out []string
	dir := filepath.Join(n.RootDir, "image_manager", "pulled")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == dir {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, p+": "+string(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hasImage reports whether the node's containerd (namespace k8s.io) holds ref.
func hasImage(t *testing.T, n *nodetest.Node, ref string) bool {
	t.Helper()
	out, err := exec.Command("ctr", "--address", strings.TrimPrefix(n.CRIEndpoint, "unix://"), "--namespace", "k8s.io", "images", "list", "--quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images list on %s: %v\n%s", n.Name, err, out)
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if string(bytes.TrimSpace(line)) == ref {
			return true
		}
	}
	return false
}

func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "---- " + path + ":\n" + strings.Join(lines, "\n")
}

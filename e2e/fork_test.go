//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/fsstore"
)

// The fork test's nodes: one runs the stock kubelet v1.37.2, the other the
// fork (the same kubelet with kubeletadapter's image pull manager).
const (
	stockNodeName = "stock-1"
	forkNodeName  = "fork-1"
)

// forkStartLine is what kubeletadapter logs once when the fork's image pull
// manager starts; the stock kubelet never logs it.
const forkStartLine = "Image pull manager: pullrecords library"

// forkTestTimeout bounds the whole fork test once the shared scene is up.
const forkTestTimeout = 15 * time.Minute

// forkKubelet returns the fork kubelet: PULLRECORDS_FORK_KUBELET, or what
// scripts/fork-kubelet.sh builds (about a minute with a warm build cache).
func forkKubelet(t *testing.T, ctx context.Context) string {
	t.Helper()
	if p := os.Getenv("PULLRECORDS_FORK_KUBELET"); p != "" {
		return p
	}
	cmd := exec.CommandContext(ctx, "bash", "../scripts/fork-kubelet.sh")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/fork-kubelet.sh: %v\n%s", err, lastN(stderr.String(), 4000))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// switchableKubelet writes, in dir, a kubelet program that execs the
// program whose path is in dir/kubelet.which (exec: the kubelet keeps the
// PID nodetest started, so stopping it stops the real kubelet), and
// returns the program and a function choosing the binary the next start
// runs. That is how one node, on one root dir, switches between the stock
// kubelet and the fork.
func switchableKubelet(t *testing.T, dir, initial string) (string, func(string)) {
	t.Helper()
	which := filepath.Join(dir, "kubelet.which")
	choose := func(bin string) {
		if err := os.WriteFile(which, []byte(bin), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	choose(initial)
	prog := filepath.Join(dir, "kubelet")
	script := "#!/bin/sh\nexec \"$(cat '" + which + "')\" \"$@\"\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog, choose
}

// forkNode is one node of the fork test with the kubelet it runs.
type forkNode struct {
	*nodetest.Node
	label  string       // "stock" or "fork": the binary it started with
	choose func(string) // the kubelet binary of the next start
}

// TestForkMatchesStockKubelet runs the same pods on a node with the stock
// kubelet v1.37.2 and a node with the fork (kubelet v1.37.2 patched with
// kubeletadapter/hack/kuberuntime_manager.patch), both registered to one
// API server and pulling from an htpasswd registry (the private image) and
// an open one (the public image), and asserts after each scenario that both
// nodes decided the same (Succeeded, ErrImagePull or ErrImageNeverPull, the
// one the KEP-2535 policy demands) and that the record files under
// RootDir/image_manager are the same bytes once normalised (see
// normaliseRecord).
func TestForkMatchesStockKubelet(t *testing.T) {
	shared := sharedScene(t)
	ctx, cancel := context.WithTimeout(context.Background(), forkTestTimeout)
	defer cancel()
	fork := forkKubelet(t, ctx)
	stock := filepath.Join(mustBinDir(t), "kubelet")

	// An API server of its own: the shared one issued tokens to the shim
	// tests' node names only. The registries and images are the shared
	// scene's.
	srv, err := apiservertest.Start(ctx, apiservertest.Options{NodeNames: []string{stockNodeName, forkNodeName}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	s := *shared
	s.srv = srv
	if s.cs, err = kubernetes.NewForConfig(srv.Admin); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"tenant-a", "tenant-b", "tenant-c"} {
		if _, err := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// regcred: tenant A's right secret; samecred: the same content under
	// another name in another namespace; badcred: tenant C's wrong password.
	mustSecret(t, ctx, s.cs, "tenant-a", "regcred", s.origin.Host, s.auth.Username, s.auth.Password)
	mustSecret(t, ctx, s.cs, "tenant-b", "samecred", s.origin.Host, s.auth.Username, s.auth.Password)
	mustSecret(t, ctx, s.cs, "tenant-c", "badcred", s.origin.Host, s.auth.Username, s.auth.Password+"-wrong")

	// Scenario j's origin: a proxy that holds manifest requests, so that a
	// pull is in flight when the fork is killed; its host must be known to
	// containerd before the nodes start.
	slow := newSlowOrigin(t, s.origin)
	mustSecret(t, ctx, s.cs, "tenant-a", "regcred-slow", slow.host(), s.auth.Username, s.auth.Password)

	nodes := startForkNodes(t, ctx, &s, map[string]string{stockNodeName: stock, forkNodeName: fork}, nil, slow.host())
	both := []*forkNode{nodes[stockNodeName], nodes[forkNodeName]}

	t.Run("start line and lock", func(t *testing.T) {
		for _, n := range both {
			data, err := os.ReadFile(n.KubeletLog())
			if err != nil {
				t.Fatal(err)
			}
			if got, want := bytes.Contains(data, []byte(forkStartLine)), n.label == "fork"; got != want {
				t.Errorf("%s kubelet log has the line %q: %v, want %v", n.label, forkStartLine, got, want)
			}
			_, err = os.Stat(filepath.Join(n.RootDir, "image_manager", fsstore.LockFile))
			if got, want := err == nil, n.label == "fork"; got != want {
				t.Errorf("%s kubelet: %s present: %v, want %v (err %v)", n.label, fsstore.LockFile, got, want, err)
			}
		}
	})

	var digestRef, tagDigestRef string
	steps := []struct {
		name string
		pods []forkPod
	}{
		{"a tenant A with the right secret", []forkPod{{ns: "tenant-a", image: s.private, secret: "regcred", want: outcomeSucceeded}}},
		{"b same-content secret, other name and namespace", []forkPod{{ns: "tenant-b", image: s.private, secret: "samecred", want: outcomeSucceeded}}},
		{"c wrong password", []forkPod{{ns: "tenant-c", image: s.private, secret: "badcred", want: outcomeErrImagePull}}},
		{"d no secret, IfNotPresent, after A", []forkPod{{ns: "tenant-c", image: s.private, want: outcomeErrImagePull}}},
		{"e policy Never", []forkPod{
			// Never pulled on these nodes yet (g pulls it).
			{ns: "tenant-c", image: s.publicImage, policy: corev1.PullNever, want: outcomeErrImageNeverPull},
			// Present, but tenant C's pod has no credential the record accepts.
			{ns: "tenant-c", image: s.private, policy: corev1.PullNever, want: outcomeErrImageNeverPull},
			// Present and tenant A's secret is in the record.
			{ns: "tenant-a", image: s.private, secret: "regcred", policy: corev1.PullNever, want: outcomeSucceeded},
		}},
		{"f tag, digest and tag@digest spellings", nil}, // filled in below, once the digest is known
		{"g anonymous public image", []forkPod{{ns: "tenant-c", image: s.publicImage, want: outcomeSucceeded}}},
	}
	for i, step := range steps {
		ok := t.Run(step.name, func(t *testing.T) {
			pods := step.pods
			if strings.HasPrefix(step.name, "f ") {
				digestRef, tagDigestRef = privateDigestRefs(t, ctx, &s, both)
				pods = []forkPod{
					{ns: "tenant-a", image: digestRef, secret: "regcred", want: outcomeSucceeded},
					{ns: "tenant-a", image: tagDigestRef, secret: "regcred", want: outcomeSucceeded},
					{ns: "tenant-c", image: digestRef, want: outcomeErrImagePull},
					{ns: "tenant-c", image: tagDigestRef, want: outcomeErrImagePull},
					{ns: "tenant-b", image: digestRef, secret: "samecred", want: outcomeSucceeded},
				}
			}
			runOnBoth(t, ctx, &s, both, fmt.Sprintf("s%d", i), pods)
			requireSameRecords(t, both[0].Node, both[1].Node)
		})
		if !ok {
			t.FailNow()
		}
	}
	// After the restarts, the decisions of a, c, d and e again.
	again := []forkPod{
		{ns: "tenant-a", image: s.private, secret: "regcred", want: outcomeSucceeded},
		{ns: "tenant-c", image: s.private, secret: "badcred", want: outcomeErrImagePull},
		{ns: "tenant-c", image: s.private, want: outcomeErrImagePull},
		{ns: "tenant-c", image: s.private, policy: corev1.PullNever, want: outcomeErrImageNeverPull},
		{ns: "tenant-a", image: digestRef, secret: "regcred", policy: corev1.PullNever, want: outcomeSucceeded},
	}

	if !t.Run("h kubelet restart", func(t *testing.T) {
		before := [][]byte{recordsDigest(t, both[0].Node), recordsDigest(t, both[1].Node)}
		for _, n := range both {
			n.StopKubelet()
			if err := n.StartKubelet(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for i, n := range both {
			if after := recordsDigest(t, n.Node); !bytes.Equal(before[i], after) {
				t.Errorf("%s: the restart changed the record files:\nbefore:\n%s\nafter:\n%s", n.label, before[i], after)
			}
		}
		runOnBoth(t, ctx, &s, both, "h", again)
		requireSameRecords(t, both[0].Node, both[1].Node)
	}) {
		t.FailNow()
	}

	t.Run("i switch-over stock to fork to stock on one root dir", func(t *testing.T) {
		n, other := nodes[stockNodeName], nodes[forkNodeName]
		for j, bin := range []struct{ label, path string }{{"fork", fork}, {"stock", stock}} {
			before := recordsDigest(t, n.Node)
			n.StopKubelet()
			n.choose(bin.path)
			if err := n.StartKubelet(ctx); err != nil {
				t.Fatal(err)
			}
			// The start alone rewrites nothing: the same bytes, times and all.
			if after := recordsDigest(t, n.Node); !bytes.Equal(before, after) {
				t.Errorf("starting the %s kubelet on the stock node's root dir changed the record files:\nbefore:\n%s\nafter:\n%s", bin.label, before, after)
			}
			n.label = bin.label
			runOnBoth(t, ctx, &s, []*forkNode{n, other}, fmt.Sprintf("i%d", j), again)
			requireSameRecords(t, n.Node, other.Node)
		}
		data, err := os.ReadFile(n.KubeletLog())
		if err != nil {
			t.Fatal(err)
		}
		// The log is appended to: one fork start between the stock ones.
		if c := bytes.Count(data, []byte(forkStartLine)); c != 1 {
			t.Errorf("the switched node's kubelet log has %d fork start lines, want 1 (the one fork run)", c)
		}
	})

	t.Run("j kill -9 of the fork during a pull", func(t *testing.T) {
		f, other := nodes[forkNodeName], nodes[stockNodeName]
		image := slow.host() + "/" + s.privateRepo + ":v1"
		s.createPod(t, ctx, podSpec{ns: "tenant-a", name: "j-kill", node: f.Name, image: image, secret: "regcred-slow"})
		waitFor(t, ctx, "the fork's pull held at the origin", func() bool { return slow.inFlight.Load() > 0 })
		intents, _ := os.ReadDir(filepath.Join(f.RootDir, "image_manager", "pulling"))
		if len(intents) == 0 {
			t.Errorf("no pull intent under %s/image_manager/pulling while the pull is held", f.RootDir)
		}
		killKubelet(t, f.Node)
		// The records as the killed kubelet left them: sound.
		bin, err := pullrecordsBinary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, bin, "fsck", "--kubelet-dir", f.RootDir).CombinedOutput()
		if err != nil {
			t.Errorf("pullrecords fsck --kubelet-dir %s after the kill: %v\n%s", f.RootDir, err, out)
		}
		t.Logf("fsck after the kill: %s", strings.TrimSpace(string(out)))
		slow.releaseAll()
		restartKubelet(t, ctx, f.Node)
		if got := waitOutcome(ctx, &s, "tenant-a", "j-kill"); got != outcomeSucceeded {
			t.Errorf("fork, the killed pull's pod after the restart: %s, want %s\n%s", got, outcomeSucceeded, lastLines(f.KubeletLog(), 20))
		}
		s.deletePodAndWait(t, ctx, "tenant-a", "j-kill")
		// The stock node pulls the same image, so that both have its record.
		runOnBoth(t, ctx, &s, []*forkNode{other}, "j", []forkPod{{ns: "tenant-a", image: image, secret: "regcred-slow", want: outcomeSucceeded}})
		runOnBoth(t, ctx, &s, []*forkNode{other, f}, "j-again", append(again,
			forkPod{ns: "tenant-c", image: image, want: outcomeErrImagePull}))
		requireSameRecords(t, other.Node, f.Node)
	})
}

// waitFor polls cond every 100 ms, up to a minute and ctx.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killKubelet sends SIGKILL to the node's kubelet, the process whose
// command line has the node's --root-dir, and waits until it is gone.
func killKubelet(t *testing.T, n *nodetest.Node) {
	t.Helper()
	want := []byte("--root-dir=" + n.RootDir + "\x00")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, want) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("node %s: %d processes with %s, want the one kubelet", n.Name, len(pids), want)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, context.Background(), "the killed kubelet gone", func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pids[0]))
		// Gone, or a zombie until its parent (the test binary) reaps it.
		return err != nil || bytes.Contains(stat, []byte(") Z "))
	})
}

// restartKubelet starts the node's kubelet again once nodetest noticed the
// old one exited.
func restartKubelet(t *testing.T, ctx context.Context, n *nodetest.Node) {
	t.Helper()
	var err error
	waitFor(t, ctx, "the kubelet started again", func() bool {
		err = n.StartKubelet(ctx)
		return err == nil || !strings.Contains(err.Error(), "already running")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// startForkNodes starts the nodes (name → kubelet binary) at once. Both
// registries are reached directly, over plain HTTP; hosts, when not nil,
// are containerd's hosts.toml registry hosts (mirrors) besides them.
func startForkNodes(t *testing.T, ctx context.Context, s *shimScene, kubelets map[string]string, hosts []nodetest.RegistryHost, insecure ...string) map[string]*forkNode {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	nodes := map[string]*forkNode{}
	for name, bin := range kubelets {
		dir := t.TempDir()
		prog, choose := switchableKubelet(t, dir, bin)
		label := "stock"
		if name == forkNodeName {
			label = "fork"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := nodetest.StartNode(ctx, nodetest.NodeOptions{
				Name:               name,
				Server:             s.srv,
				Kubelet:            prog,
				SandboxImage:       s.sandbox,
				InsecureRegistries: append([]string{s.public.Host, s.origin.Host}, insecure...),
				RegistryHosts:      hosts,
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			nodes[name] = &forkNode{Node: n, label: label, choose: choose}
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

func mustSecret(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name, host, user, password string) {
	t.Helper()
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"username": user, "password": password,
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}}})
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// The outcomes a pod of the fork test can have.
const (
	outcomeSucceeded         = "Succeeded"
	outcomeErrImagePull      = "ErrImagePull"
	outcomeErrImageNeverPull = "ErrImageNeverPull"
)

// forkPod is a pod the fork test runs on every node, with the outcome the
// policy demands.
type forkPod struct {
	ns, image, secret string
	policy            corev1.PullPolicy
	want              string
}

// runOnBoth creates each pod on every node, one pod after the other (the
// records a pod leaves are what the next decision reads), waits for each
// node's outcome, asserts it is the wanted one on every node, and deletes
// the pods (a refused pod retries in back-off, and a retry could leave a
// pull intent in flight while the records are compared).
func runOnBoth(t *testing.T, ctx context.Context, s *shimScene, nodes []*forkNode, prefix string, pods []forkPod) {
	t.Helper()
	for i, p := range pods {
		got := map[string]string{}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, n := range nodes {
			name := fmt.Sprintf("%s-%d-%s", prefix, i, n.Name)
			s.createPod(t, ctx, podSpec{ns: p.ns, name: name, node: n.Name, image: p.image, secret: p.secret, policy: p.policy})
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := waitOutcome(ctx, s, p.ns, name)
				mu.Lock()
				got[n.Name] = o
				mu.Unlock()
			}()
		}
		wg.Wait()
		for _, n := range nodes {
			if got[n.Name] != p.want {
				t.Errorf("%s kubelet, pod in %s, image %s, secret %q, policy %q: outcome %s, want %s\n%s",
					n.label, p.ns, p.image, p.secret, p.policy, got[n.Name], p.want, lastLines(n.KubeletLog(), 20))
			}
		}
		for _, n := range nodes {
			s.deletePodAndWait(t, ctx, p.ns, fmt.Sprintf("%s-%d-%s", prefix, i, n.Name))
		}
	}
}

// waitOutcome polls the pod (every 200 ms, up to 2 minutes and ctx) until it
// has one of the outcomes, and returns it (or what it last saw).
func waitOutcome(ctx context.Context, s *shimScene, ns, name string) string {
	deadline := time.Now().Add(2 * time.Minute)
	last := "no status"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pod, err := s.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
		} else {
			switch pod.Status.Phase {
			case corev1.PodSucceeded:
				return outcomeSucceeded
			case corev1.PodFailed:
				return "Failed"
			}
			for _, c := range pod.Status.ContainerStatuses {
				if w := c.State.Waiting; w != nil {
					switch w.Reason {
					case "ErrImagePull", "ImagePullBackOff":
						return outcomeErrImagePull
					case "ErrImageNeverPull":
						return outcomeErrImageNeverPull
					}
					last = "waiting: " + w.Reason
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "none in time (" + last + ")"
}

// privateDigestRefs returns the private image by digest and by tag@digest,
// the digest read from the image ID the first node reported for a tenant-A
// pod of the private image by tag (run on every node, so that the nodes
// keep the same history; scenario a pulled the image already).
func privateDigestRefs(t *testing.T, ctx context.Context, s *shimScene, nodes []*forkNode) (string, string) {
	t.Helper()
	var pod *corev1.Pod
	for i, n := range nodes {
		name := "digest-probe-" + n.Name
		s.createPod(t, ctx, podSpec{ns: "tenant-a", name: name, node: n.Name, image: s.private, secret: "regcred"})
		p := s.waitPod(t, ctx, n.Node, "tenant-a", name, "Succeeded", succeeded(t))
		s.deletePodAndWait(t, ctx, "tenant-a", name)
		if i == 0 {
			pod = p
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		if _, d, ok := strings.Cut(c.ImageID, "@"); ok && strings.HasPrefix(d, "sha256:") {
			repo := s.origin.Host + "/" + s.privateRepo
			return repo + "@" + d, repo + ":v1@" + d
		}
	}
	t.Fatalf("no repository digest in the image ID of %s/%s: %+v", pod.Namespace, pod.Name, pod.Status.ContainerStatuses)
	return "", ""
}

// recordFiles reads every regular file under the node's
// RootDir/image_manager, by path relative to it, but the fork's lock file
// (fsstore.LockFile: the holder's PID and start time, which the stock
// kubelet neither writes nor reads; it stays after the fork stops, so a
// root dir the fork once ran on keeps it). holdsLock checks it apart.
func recordFiles(t *testing.T, n *nodetest.Node) map[string][]byte {
	t.Helper()
	dir := filepath.Join(n.RootDir, "image_manager")
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !d.Type().IsRegular() || rel == fsstore.LockFile {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// recordsDigest is the node's record files as text (path, then content),
// sorted by path, not normalised.
func recordsDigest(t *testing.T, n *nodetest.Node) []byte {
	t.Helper()
	files := recordFiles(t, n)
	var names []string
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, k := range names {
		fmt.Fprintf(&b, "%s\n%s\n", k, files[k])
	}
	return b.Bytes()
}

var lastUpdatedTime = regexp.MustCompile(`"lastUpdatedTime":"[^"]*"`)

// normaliseRecord makes two nodes' record files comparable. The one field
// replaced is lastUpdatedTime: it is the wall-clock time the kubelet wrote
// the record, which differs between two nodes by the milliseconds between
// their pulls. Nothing else is node-specific: the file names are hashes of
// the image reference or ID (the same images, pushed once, on both nodes),
// the image IDs are content digests, and the credential mappings name the
// Secrets of the one API server (UID, namespace, name) and the hashes of
// their contents. The node name, root dir and pod UIDs appear nowhere.
func normaliseRecord(b []byte) []byte {
	return lastUpdatedTime.ReplaceAll(b, []byte(`"lastUpdatedTime":"<normalised>"`))
}

// requireSameRecords fails the test unless both nodes have the same record
// files, byte for byte once normalised, and at least one pulled record.
func requireSameRecords(t *testing.T, a, b *nodetest.Node) {
	t.Helper()
	fa, fb := recordFiles(t, a), recordFiles(t, b)
	pulled := 0
	for k, va := range fa {
		if strings.HasPrefix(k, "pulled"+string(filepath.Separator)) {
			pulled++
		}
		vb, ok := fb[k]
		switch {
		case !ok:
			t.Errorf("record %s is on %s only:\n%s", k, a.Name, va)
		case !bytes.Equal(normaliseRecord(va), normaliseRecord(vb)):
			t.Errorf("record %s differs:\n%s: %s\n%s: %s", k, a.Name, va, b.Name, vb)
		}
	}
	for k, vb := range fb {
		if _, ok := fa[k]; !ok {
			t.Errorf("record %s is on %s only:\n%s", k, b.Name, vb)
		}
	}
	if pulled == 0 {
		t.Errorf("no pulled record on %s (files: %d): nothing was compared", a.Name, len(fa))
	}
	t.Logf("record files compared: %d (%d pulled records)", len(fa), pulled)
}

//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/cri"
)

// The nodes of TestForkNodeSwitches, per subtest. The API server of the
// test issues kubelet tokens to these names only, at its start, so a new
// subtest adds its names here.
const (
	// preloadedImageProtection: a stock kubelet, the fork with the switch
	// off (written false in the file) and the fork with it on.
	pipStock = "preload-stock"
	pipOff   = "preload-off"
	pipOn    = "preload-on"
	// credentialExpiry: a stock kubelet and the fork with the switch on.
	ceStock = "expiry-stock"
	ceFork  = "expiry-fork"
	// normalizedImageNames: a stock kubelet and the fork with the switch on.
	nnStock = "names-stock"
	nnFork  = "names-fork"
)

var switchNodeNames = []string{pipStock, pipOff, pipOn, ceStock, ceFork, nnStock, nnFork}

// Node configuration files (kubeletadapter.NodeConfigPath) of the switch
// scenes.
const (
	nodeConfigHeader     = "apiVersion: pullrecords.io/v1alpha1\nkind: NodeConfiguration\n"
	preloadProtectionOn  = nodeConfigHeader + "preloadedImageProtection: true\n"
	preloadProtectionOff = nodeConfigHeader + "preloadedImageProtection: false\n"
)

// The namespaces of the switch scenes' pods.
const (
	switchTestNamespaceA  = "tenant-a" // has regcred, the origin's right secret
	switchTestNamespaceNo = "tenant-c" // has no secret at all
)

// switchScene is what the subtests of TestForkNodeSwitches share: the
// shared scene's registries and images, an API server of its own (with
// switchNodeNames), the namespaces and regcred, and both kubelet programs.
type switchScene struct {
	shimScene
	ctx         context.Context
	stock, fork string // kubelet programs
}

// switchNode is one node a switch subtest starts: its name (one of
// switchNodeNames), a label naming it in failures, its kubelet program, and
// the content of <root dir>/pullrecords/config.yaml ("": no file).
type switchNode struct {
	name, label, kubelet, config string
}

// TestForkNodeSwitches shows each of kubeletadapter's per-node switches
// (<kubelet root dir>/pullrecords/config.yaml) on real kubelets: the scene
// the switch is for, on a stock kubelet v1.37.2 and on the fork with the
// switch on (for preloadedImageProtection also the fork with it off),
// registered to one API server.
func TestForkNodeSwitches(t *testing.T) {
	sc := startSwitchScene(t)
	t.Run("preloadedImageProtection", func(t *testing.T) { testPreloadedImageProtection(t, sc) })
	t.Run("credentialExpiry", func(t *testing.T) { testCredentialExpiry(t, sc) })
	t.Run("normalizedImageNames", func(t *testing.T) { testNormalizedImageNames(t, sc) })
}

func startSwitchScene(t *testing.T) *switchScene {
	t.Helper()
	shared := sharedScene(t)
	ctx, cancel := context.WithTimeout(context.Background(), forkTestTimeout)
	t.Cleanup(cancel)
	sc := &switchScene{shimScene: *shared, ctx: ctx, fork: forkKubelet(t, ctx), stock: filepath.Join(mustBinDir(t), "kubelet")}
	srv, err := apiservertest.Start(ctx, apiservertest.Options{NodeNames: switchNodeNames})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	sc.srv = srv
	if sc.cs, err = kubernetes.NewForConfig(srv.Admin); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{switchTestNamespaceA, switchTestNamespaceNo} {
		if _, err := sc.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustSecret(t, ctx, sc.cs, switchTestNamespaceA, "regcred", sc.origin.Host, sc.auth.Username, sc.auth.Password)
	return sc
}

// startSwitchNodes starts the nodes (at once), then, one after the other,
// writes each node's configuration file into its kubelet root dir and
// restarts its kubelet, which reads the file at start. It returns the
// nodes in the order given. The first start, without the file, is a fork
// start with every switch off; only the second one's start line counts
// (see requireStartLine). The nodes reach the shared scene's registries
// and the insecure ones over plain HTTP, and the hosts (nil: none) through
// containerd's hosts.toml files.
func (sc *switchScene) startSwitchNodes(t *testing.T, specs []switchNode, hosts []nodetest.RegistryHost, insecure ...string) []*forkNode {
	t.Helper()
	kubelets := map[string]string{}
	for _, sp := range specs {
		kubelets[sp.name] = sp.kubelet
	}
	started := startForkNodes(t, sc.ctx, &sc.shimScene, kubelets, hosts, insecure...)
	nodes := make([]*forkNode, len(specs))
	for i, sp := range specs {
		n := started[sp.name]
		n.label = sp.label
		nodes[i] = n
		if sp.config == "" {
			continue
		}
		path := nodeConfigPath(n)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		n.StopKubelet()
		if err := os.WriteFile(path, []byte(sp.config), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := n.StartKubelet(sc.ctx); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// nodeConfigPath is where the fork reads the node's switches
// (kubeletadapter.NodeConfigPath of its root dir).
func nodeConfigPath(n *forkNode) string {
	return filepath.Join(n.RootDir, "pullrecords", "config.yaml")
}

// requireStartLine fails the test unless the node's kubelet log has, as
// its last fork start line (forkStartLine), one containing every one of
// want; with want nil, unless the log has no fork start line at all (a
// stock kubelet).
func requireStartLine(t *testing.T, n *forkNode, want ...string) {
	t.Helper()
	data, err := os.ReadFile(n.KubeletLog())
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, forkStartLine) {
			last = line
		}
	}
	switch {
	case want == nil && last != "":
		t.Errorf("%s kubelet logged a fork start line: %s", n.label, last)
	case want != nil && last == "":
		t.Errorf("%s kubelet logged no fork start line (%q)", n.label, forkStartLine)
	}
	for _, w := range want {
		if !strings.Contains(last, w) {
			t.Errorf("%s kubelet's start line does not name %q: %s", n.label, w, last)
		}
	}
}

// switchPod is a pod a switch subtest runs on each of its nodes, and the
// outcome wanted on each (by node, in the nodes' order); with pulls, also
// whether the kubelet pulls on each (its "Pulling" event, see podPulled).
type switchPod struct {
	ns, image, secret string
	policy            corev1.PullPolicy
	want              []string
	pulls             []bool
}

// runPerNode creates the pod on every node at once, waits for each node's
// outcome, asserts it is that node's wanted one, and deletes the pods.
func (sc *switchScene) runPerNode(t *testing.T, nodes []*forkNode, prefix string, p switchPod) {
	t.Helper()
	got := make([]string, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		name := prefix + "-" + n.Name
		sc.createPod(t, sc.ctx, podSpec{ns: p.ns, name: name, node: n.Name, image: p.image, secret: p.secret, policy: p.policy})
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = waitOutcome(sc.ctx, &sc.shimScene, p.ns, name)
		}()
	}
	wg.Wait()
	for i, n := range nodes {
		if got[i] != p.want[i] {
			t.Errorf("%s kubelet, pod %s in %s, image %s, secret %q, policy %q: outcome %s, want %s\n%s",
				n.label, prefix, p.ns, p.image, p.secret, p.policy, got[i], p.want[i], lastLines(n.KubeletLog(), 20))
		}
		if p.pulls == nil {
			continue
		}
		if pulled, events := sc.podPulled(t, p.ns, prefix+"-"+n.Name); pulled != p.pulls[i] {
			t.Errorf("%s kubelet, pod %s in %s, image %s, secret %q, policy %q: pulled %v, want %v; events %q",
				n.label, prefix, p.ns, p.image, p.secret, p.policy, pulled, p.pulls[i], events)
		}
	}
	for _, n := range nodes {
		sc.deletePodAndWait(t, sc.ctx, p.ns, prefix+"-"+n.Name)
	}
}

// preloadImage pulls image into the node's containerd through CRI, without
// credentials and without the kubelet (which so has no record and no
// intent for it), and returns the image ID.
func preloadImage(t *testing.T, ctx context.Context, n *forkNode, image string) string {
	t.Helper()
	svc, err := cri.Dial(ctx, n.CRIEndpoint)
	if err != nil {
		t.Fatalf("%s: dial containerd: %v", n.label, err)
	}
	defer svc.Close()
	if _, err := svc.PullImage(ctx, image, nil); err != nil {
		t.Fatalf("%s: preload %s: %v", n.label, image, err)
	}
	return imageID(t, ctx, n, image)
}

// imageID returns the ID of the image the node's containerd has under
// image, failing the test when it has none.
func imageID(t *testing.T, ctx context.Context, n *forkNode, image string) string {
	t.Helper()
	svc, err := cri.Dial(ctx, n.CRIEndpoint)
	if err != nil {
		t.Fatalf("%s: dial containerd: %v", n.label, err)
	}
	defer svc.Close()
	img, err := svc.ImageStatus(ctx, image)
	if err != nil {
		t.Fatalf("%s: image status %s: %v", n.label, image, err)
	}
	if img == nil || img.ID == "" {
		t.Fatalf("%s: containerd has no image %s", n.label, image)
	}
	return img.ID
}

// testPreloadedImageProtection is kubernetes#138175 on real kubelets. An
// image is preloaded on each node under an open registry's name, X, and a
// pod without credentials may use it with imagePullPolicy Never (the
// default policy NeverVerifyPreloadedImages). A tenant's pod then pulls the
// same content under a private name, Y, with its secret: the kubelet writes
// a pulled record for the image ID whose credential mapping names Y only.
// The stock kubelet and the fork with the switch off now count the content
// as pulled by the kubelet under every name, so the pod using X with Never
// gets ErrImageNeverPull; the fork with preloadedImageProtection runs it.
// The switch grants nothing a pull would refuse: with it on, a pod without
// a secret asking Y with Never still gets ErrImageNeverPull. And it writes
// nothing the stock kubelet would not: the record files are the same on
// the three nodes.
func testPreloadedImageProtection(t *testing.T, sc *switchScene) {
	ctx := sc.ctx
	// The same content under X (open registry) and Y (htpasswd origin),
	// content of this run only, so no other test's record names it.
	files := withFile(sc.pauseFiles, "etc/which", "preloaded "+randomHex(4))
	preloaded := sc.public.Host + "/preloaded/app:v1"
	private := sc.origin.Host + "/tenant-a/preloaded-copy:v1"
	dx, err := nodetest.PushImage(ctx, sc.public, preloaded, files, []string{"/pause"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dy, err := nodetest.PushImage(ctx, sc.origin, private, files, []string{"/pause"}, sc.auth)
	if err != nil {
		t.Fatal(err)
	}
	if dx != dy {
		t.Fatalf("%s has digest %s, %s has %s: not the same content", preloaded, dx, private, dy)
	}

	nodes := sc.startSwitchNodes(t, []switchNode{
		{name: pipStock, label: "stock", kubelet: sc.stock},
		{name: pipOff, label: "fork, switch off", kubelet: sc.fork, config: preloadProtectionOff},
		{name: pipOn, label: "fork, switch on", kubelet: sc.fork, config: preloadProtectionOn},
	}, nil)
	stock, off, on := nodes[0], nodes[1], nodes[2]
	all := func(o string) []string { return []string{o, o, o} }

	t.Run("start lines", func(t *testing.T) {
		requireStartLine(t, stock)
		// The file read (its path, not "no file at" it) and the switches it
		// turned on, as klog quotes them.
		requireStartLine(t, off, `deliberateDifferences="none turned on"`, `nodeConfig="`+nodeConfigPath(off)+`"`)
		requireStartLine(t, on, `deliberateDifferences="preloadedImageProtection"`, `nodeConfig="`+nodeConfigPath(on)+`"`)
	})

	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = preloadImage(t, ctx, n, preloaded)
		if files, _ := os.ReadDir(filepath.Join(n.RootDir, "image_manager", "pulled")); len(files) != 0 {
			t.Fatalf("%s: %d pulled records after the preload, want none (the kubelet did not pull it)", n.label, len(files))
		}
	}
	steps := []struct {
		name string
		pod  switchPod
	}{
		// Before any pull by a kubelet: X is preloaded everywhere.
		{"a preloaded name, Never, before", switchPod{ns: switchTestNamespaceNo, image: preloaded, policy: corev1.PullNever, want: all(outcomeSucceeded)}},
		// Tenant A pulls the same content as Y with its secret.
		{"b private name with the secret", switchPod{ns: switchTestNamespaceA, image: private, secret: "regcred", want: all(outcomeSucceeded)}},
		// The scene of #138175.
		{"c preloaded name, Never, after", switchPod{ns: switchTestNamespaceNo, image: preloaded, policy: corev1.PullNever,
			want: []string{outcomeErrImageNeverPull, outcomeErrImageNeverPull, outcomeSucceeded}}},
		// Y itself stays the tenant's: no secret, Never, refused everywhere.
		{"d private name, Never, no secret", switchPod{ns: switchTestNamespaceNo, image: private, policy: corev1.PullNever, want: all(outcomeErrImageNeverPull)}},
	}
	for _, step := range steps {
		if !t.Run(step.name, func(t *testing.T) {
			sc.runPerNode(t, nodes, "pip-"+step.name[:1], step.pod)
		}) {
			t.FailNow()
		}
	}

	t.Run("one image ID, a record naming the private name only", func(t *testing.T) {
		privateName, _, _ := strings.Cut(strings.TrimPrefix(private, sc.origin.Host+"/"), ":")
		preloadedName, _, _ := strings.Cut(strings.TrimPrefix(preloaded, sc.public.Host+"/"), ":")
		for i, n := range nodes {
			if id := imageID(t, ctx, n, private); id != ids[i] {
				t.Errorf("%s: %s is image %s, the preloaded %s is %s: want one image", n.label, private, id, preloaded, ids[i])
			}
			if m, raw := pulledRecordMapping(t, n.Node, sc.origin.Host+"/"+privateName); m == nil {
				t.Errorf("%s: no pulled record maps %s (records: %s)", n.label, privateName, raw)
			}
			if m, raw := pulledRecordMapping(t, n.Node, sc.public.Host+"/"+preloadedName); m != nil {
				t.Errorf("%s: a pulled record maps the preloaded name %s: %s", n.label, preloadedName, raw)
			}
		}
		requireSameRecords(t, stock.Node, off.Node)
		requireSameRecords(t, stock.Node, on.Node)
	})
}

// podPulled waits (every 200 ms, up to 30 s and the scene's context) until
// the pod has an event saying how its image was settled ("Pulled": pulled
// or already present; "Failed"; "ErrImageNeverPull"), and reports whether
// the kubelet pulled for it: a "Pulling" event, which the kubelet's image
// manager sends before every pull and never otherwise (events of one pod
// reach the API server in the order they were sent). It also returns the
// events, "reason: message", for failures.
func (sc *switchScene) podPulled(t *testing.T, ns, name string) (bool, []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, err := sc.cs.CoreV1().Events(ns).List(sc.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		pulling, settled := false, false
		for _, e := range evs.Items {
			all = append(all, e.Reason+": "+e.Message)
			switch e.Reason {
			case "Pulling":
				pulling = true
			case "Pulled", "Failed", "ErrImageNeverPull":
				settled = true
			}
		}
		if settled {
			return pulling, all
		}
		if time.Now().After(deadline) || sc.ctx.Err() != nil {
			t.Fatalf("pod %s/%s: no event settling its image within 30 s; events %q", ns, name, all)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// expiryTTL is the credentialExpiry of the fork node of the
// credentialExpiry scene: long enough for a second pod (and a kubelet
// restart) to be decided within it on a loaded 2-core machine (measured:
// 5.4-6 s on a quiet one; a slower run fails as too slow, never as a
// wrong decision), short enough to wait past it twice.
const expiryTTL = 30 * time.Second

// manifestRequests counts the registry's requests for a manifest of repo
// after the first skip requests.
func manifestRequests(t *testing.T, r *nodetest.Registry, repo string, skip int) int {
	t.Helper()
	n := 0
	for _, req := range since(t, r, skip) {
		if req.IsManifest() && strings.HasPrefix(req.Path, "/v2/"+repo+"/manifests/") {
			n++
		}
	}
	return n
}

// sleepUntil sleeps until the time (not a timed assertion: the scene waits
// for a TTL to pass, and only outcomes are asserted).
func sleepUntil(t *testing.T, ctx context.Context, when time.Time) {
	t.Helper()
	select {
	case <-time.After(time.Until(when)):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

// testCredentialExpiry shows credentialExpiry on real kubelets, with a
// registry of its own that can revoke the secret's password. On the fork
// with the switch, a secret vouches for the image it pulled only while a
// pull made with it was recorded less than the TTL ago: within the TTL its
// pods do not pull, past it they pull again (and the pull renews, which a
// kubelet restart keeps); once the registry refused the password, past the
// TTL its pods get ErrImagePull (IfNotPresent) and ErrImageNeverPull
// (Never), also after a kubelet restart, while the stock kubelet keeps
// running them from its record, as upstream documents. The record is never
// dropped: a pod without a secret never finds the image looking preloaded.
func testCredentialExpiry(t *testing.T, sc *switchScene) {
	ctx := sc.ctx
	// A registry of this scene only, since it revokes its password.
	auth := &nodetest.BasicAuth{Username: "expiry-robot", Password: "pw-" + randomHex(8)}
	reg, err := nodetest.StartRegistry(ctx, t.TempDir(), auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	repo := "tenant-a/expiring"
	image := reg.Host + "/" + repo + ":v1"
	if _, err := nodetest.PushImage(ctx, reg, image, withFile(sc.pauseFiles, "etc/which", "expiring "+randomHex(4)), []string{"/pause"}, auth); err != nil {
		t.Fatal(err)
	}
	mustSecret(t, ctx, sc.cs, switchTestNamespaceA, "expirycred", reg.Host, auth.Username, auth.Password)

	nodes := sc.startSwitchNodes(t, []switchNode{
		{name: ceStock, label: "stock", kubelet: sc.stock},
		{name: ceFork, label: "fork, credentialExpiry", kubelet: sc.fork, config: nodeConfigHeader + "credentialExpiry: " + expiryTTL.String() + "\n"},
	}, nil, reg.Host)
	stock, fork := nodes[0], nodes[1]
	both := func(o string) []string { return []string{o, o} }
	proofs := func(n *forkNode) int {
		entries, _ := os.ReadDir(filepath.Join(n.RootDir, "pullrecords", "credential-proofs"))
		return len(entries)
	}

	t.Run("start lines", func(t *testing.T) {
		requireStartLine(t, stock)
		requireStartLine(t, fork, "credentialExpiry="+expiryTTL.String(), `nodeConfig="`+nodeConfigPath(fork)+`"`)
	})

	// step runs the pod on both nodes, fails the subtest at once unless
	// every outcome (and pull) is the wanted one, and asserts whether the
	// registry served a manifest of the image meanwhile (a pull by either
	// node). It returns when it started and when the pods were gone: a
	// pull of the step was recorded between the two.
	step := func(id, name string, manifests bool, p switchPod) (started, done time.Time) {
		t.Helper()
		started = time.Now()
		skip := countRequests(t, reg)
		ok := t.Run(id+" "+name, func(t *testing.T) {
			sc.runPerNode(t, nodes, "ce-"+id, p)
			if got := manifestRequests(t, reg, repo, skip); (got > 0) != manifests {
				t.Errorf("the registry served %d manifest requests of %s during the step, want some: %v", got, repo, manifests)
			}
		})
		done = time.Now()
		t.Logf("step %s %q: %v", id, name, done.Sub(started).Round(100*time.Millisecond))
		if !ok {
			t.FailNow()
		}
		return started, done
	}
	// within fails the test when the machine was too slow for the scene:
	// a step meant to be decided within the TTL of a pull made at or after
	// since ended later than that.
	within := func(since, done time.Time, what string) {
		t.Helper()
		d := done.Sub(since)
		t.Logf("%s ended %v after the pull it relies on began (TTL %v)", what, d.Round(100*time.Millisecond), expiryTTL)
		if d >= expiryTTL {
			t.Fatalf("%s ended %v after the pull it relies on began: not within the TTL %v, the machine is too slow for this scene", what, d.Round(100*time.Millisecond), expiryTTL)
		}
	}
	withSecret := switchPod{ns: switchTestNamespaceA, image: image, secret: "expirycred"}
	with := func(want []string, pulls ...bool) switchPod {
		p := withSecret
		p.want, p.pulls = want, pulls
		return p
	}
	never := func(p switchPod) switchPod { p.policy = corev1.PullNever; return p }
	// Past the TTL of every pull recorded up to done (a second of margin
	// for the clocks' granularity).
	pastTTL := func(done time.Time) { sleepUntil(t, ctx, done.Add(expiryTTL+time.Second)) }

	// 1. The first pull, on both nodes; the fork keeps a proof of it.
	start1, done1 := step("1", "first pod with the secret", true, with(both(outcomeSucceeded), true, true))
	if got := proofs(fork); got == 0 {
		t.Errorf("fork: no credential proof after the pull")
	}
	if got := proofs(stock); got != 0 {
		t.Errorf("stock: %d credential proofs, want none", got)
	}
	// 2. Within the TTL, the secret vouches on both: no pull anywhere.
	_, done2 := step("2", "second pod within the TTL", false, with(both(outcomeSucceeded), false, false))
	within(start1, done2, "step 2")
	// 3. Past the TTL, the fork pulls again; stock does not.
	pastTTL(done1)
	start3, _ := step("3", "past the TTL", true, with(both(outcomeSucceeded), false, true))
	// That pull renewed the proof, and a kubelet restart keeps it.
	fork.StopKubelet()
	if err := fork.StartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	_, done3b := step("3b", "renewed, after a restart", false, with(both(outcomeSucceeded), false, false))
	within(start3, done3b, "step 3b")

	// 4. The registry revokes the secret's password. Past the TTL the fork
	// refuses the secret (it asks the registry again, which says no); the
	// stock kubelet's record keeps vouching for it.
	if err := reg.ChangePassword(ctx, "pw-"+randomHex(8)); err != nil {
		t.Fatal(err)
	}
	pastTTL(done3b)
	step("4a", "revoked, past the TTL", true, with([]string{outcomeSucceeded, outcomeErrImagePull}, false, true))
	step("4b", "revoked, past the TTL, Never", false, never(with([]string{outcomeSucceeded, outcomeErrImageNeverPull}, false, false)))
	// 5. The record stayed: without a secret the image never looks
	// preloaded.
	step("5", "no secret, Never", false, switchPod{ns: switchTestNamespaceNo, image: image, policy: corev1.PullNever,
		want: both(outcomeErrImageNeverPull), pulls: []bool{false, false}})
	for _, n := range nodes {
		if m, raw := pulledRecordMapping(t, n.Node, reg.Host+"/"+repo); m == nil {
			t.Errorf("%s: no pulled record maps %s (records: %s)", n.label, repo, raw)
		}
	}
	// 6. A restart of the fork with the proof expired: still refused.
	fork.StopKubelet()
	if err := fork.StartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	step("6", "after a restart, expired, Never", false, never(with([]string{outcomeSucceeded, outcomeErrImageNeverPull}, false, false)))
	requireStartLine(t, fork, "credentialExpiry="+expiryTTL.String())
}

// hubServer is the server of the docker.io hosts.toml of the
// normalizedImageNames scene: Docker Hub's, which the nodes never reach
// (no network; the mirror before it answers every request).
const hubServer = "https://registry-1.docker.io"

// testNormalizedImageNames shows normalizedImageNames on real kubelets. On a
// registry named host:port, every spelling of a repository keys the same
// under the kubelet's rule (the raw string, tag and digest cut) and
// normalised, so the scene needs Docker Hub's names: "tenant-a/app:v1" keys
// "tenant-a/app" on the stock kubelet and "docker.io/tenant-a/app"
// normalised, while "docker.io/tenant-a/app:v1" keys "docker.io/tenant-a/app"
// under both. Each node's containerd has a docker.io hosts.toml whose mirror
// is the shared htpasswd origin, and containerd hands the CRI request's
// credential to the mirror (the kubelet sends no server address, so
// containerd's ParseAuth gives it to every host asked), so a pod with a
// secret for docker.io pulls docker.io/tenant-a/… from the origin and a
// pull without it is refused.
//
// Tenant A pulls the image under its qualified name with its secret; the
// same secret then asks for the short name with Never: the stock kubelet
// finds no mapping for "tenant-a/…" and refuses (ErrImageNeverPull), the
// fork with the switch finds the secret under the normalised name and runs
// it without a pull; IfNotPresent, the stock kubelet pulls again and the
// fork does not. The switch grants nothing a pull would refuse: without a
// secret, both spellings with Never are refused on both nodes. The fork's
// records map the normalised name only; the stock kubelet's map both raw
// keys.
func testNormalizedImageNames(t *testing.T, sc *switchScene) {
	ctx := sc.ctx
	repo := "tenant-a/hub-app"
	qualified := "docker.io/" + repo + ":v1"
	short := repo + ":v1"
	normalisedKey, shortKey := "docker.io/"+repo, repo
	// Content of this run only, in the origin under the mirror's path for
	// docker.io/tenant-a/hub-app.
	files := withFile(sc.pauseFiles, "etc/which", "hub "+randomHex(4))
	if _, err := nodetest.PushImage(ctx, sc.origin, sc.origin.Host+"/"+repo+":v1", files, []string{"/pause"}, sc.auth); err != nil {
		t.Fatal(err)
	}
	mustSecret(t, ctx, sc.cs, switchTestNamespaceA, "hubcred", "docker.io", sc.auth.Username, sc.auth.Password)

	hub := []nodetest.RegistryHost{{Host: "docker.io", Server: hubServer, Mirrors: []string{sc.origin.URL()}}}
	nodes := sc.startSwitchNodes(t, []switchNode{
		{name: nnStock, label: "stock", kubelet: sc.stock},
		{name: nnFork, label: "fork, normalizedImageNames", kubelet: sc.fork, config: nodeConfigHeader + "normalizedImageNames: true\n"},
	}, hub)
	stock, fork := nodes[0], nodes[1]
	both := func(o string) []string { return []string{o, o} }

	t.Run("start lines", func(t *testing.T) {
		requireStartLine(t, stock)
		requireStartLine(t, fork, `deliberateDifferences="normalizedImageNames"`, `nodeConfig="`+nodeConfigPath(fork)+`"`)
	})

	// step runs the pod on both nodes, fails the subtest at once unless
	// every outcome and pull is the wanted one, and asserts what the origin
	// answered to manifest requests of the repository meanwhile: none
	// asked (untouched), asked and none served (refused), or some served.
	type originSaw int
	const (
		untouched originSaw = iota
		refused
		served
	)
	step := func(name string, want originSaw, p switchPod) {
		t.Helper()
		skip := countRequests(t, sc.origin)
		if !t.Run(name, func(t *testing.T) {
			sc.runPerNode(t, nodes, "nn-"+name[:1], p)
			asked, ok := 0, 0
			for _, req := range since(t, sc.origin, skip) {
				if req.IsManifest() && strings.HasPrefix(req.Path, "/v2/"+repo+"/manifests/") {
					asked++
					if req.Status == http.StatusOK {
						ok++
					}
				}
			}
			got := untouched
			switch {
			case ok > 0:
				got = served
			case asked > 0:
				got = refused
			}
			if got != want {
				t.Errorf("the origin answered %d manifest requests of %s during the step, %d with 200: want %s", asked, repo, ok, [...]string{"none asked", "some asked, none served", "some served"}[want])
			}
		}) {
			t.FailNow()
		}
	}
	withSecret := func(image string, policy corev1.PullPolicy, want []string, pulls ...bool) switchPod {
		return switchPod{ns: switchTestNamespaceA, image: image, secret: "hubcred", policy: policy, want: want, pulls: pulls}
	}
	noSecretNever := func(image string) switchPod {
		return switchPod{ns: switchTestNamespaceNo, image: image, policy: corev1.PullNever, want: both(outcomeErrImageNeverPull), pulls: []bool{false, false}}
	}

	// Through the mirror, without a secret: refused, so every success
	// below is the secret's.
	step("a qualified name, no secret", refused, switchPod{ns: switchTestNamespaceNo, image: qualified, want: both(outcomeErrImagePull), pulls: []bool{true, true}})
	step("b qualified name with the secret", served, withSecret(qualified, "", both(outcomeSucceeded), true, true))
	t.Run("records after b", func(t *testing.T) {
		for _, n := range nodes {
			if m, raw := pulledRecordMapping(t, n.Node, normalisedKey); m == nil {
				t.Errorf("%s: no pulled record maps %s (records: %s)", n.label, normalisedKey, raw)
			}
		}
		requireSameRecords(t, stock.Node, fork.Node)
	})
	// The difference: another spelling of the same repository.
	step("c short name with the secret, Never", untouched, withSecret(short, corev1.PullNever, []string{outcomeErrImageNeverPull, outcomeSucceeded}, false, false))
	// Without a secret, neither spelling is the pod's on either node.
	step("d short name, no secret, Never", untouched, noSecretNever(short))
	step("e qualified name, no secret, Never", untouched, noSecretNever(qualified))
	// IfNotPresent: the stock kubelet pulls for the short name (and maps
	// it); the fork does not.
	step("f short name with the secret", served, withSecret(short, "", both(outcomeSucceeded), true, false))
	t.Run("records after f", func(t *testing.T) {
		for _, n := range nodes {
			if m, raw := pulledRecordMapping(t, n.Node, normalisedKey); m == nil {
				t.Errorf("%s: no pulled record maps %s (records: %s)", n.label, normalisedKey, raw)
			}
		}
		if m, raw := pulledRecordMapping(t, stock.Node, shortKey); m == nil {
			t.Errorf("stock: no pulled record maps the raw key %s after its pull for %s (records: %s)", shortKey, short, raw)
		}
		if m, raw := pulledRecordMapping(t, fork.Node, shortKey); m != nil {
			t.Errorf("fork: a pulled record maps the raw key %s, want the normalised %s only: %s", shortKey, normalisedKey, raw)
		}
	})
	// Still refused without a secret, after both mappings exist.
	step("g short name, no secret, Never, after", untouched, noSecretNever(short))
}

//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
)

// shimTestTimeout bounds each shim test after the shared scene is up.
const shimTestTimeout = 8 * time.Minute

func shimContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), shimTestTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestMirrorBypassWithoutShim documents the bypass that the shim closes,
// on a stock kubelet v1.37.2 and containerd 1.6 whose hosts.toml makes an
// open registry the mirror of the htpasswd origin: a namespace without the
// secret runs the private image on the node where tenant A pulled it and on
// a node that never pulled it, the origin sees no blob request, and the
// kubelet's record on the first node ends up nodePodsAccessible. If this
// test fails, the bypass changed: re-read the shim's threat model.
func TestMirrorBypassWithoutShim(t *testing.T) {
	s := sharedScene(t)
	ctx := shimContext(t)
	originBefore := countRequests(t, s.origin)
	mirrorBefore := countRequests(t, s.mirror)
	nodes := s.startNodes(t, ctx, []string{"bypass-1", "bypass-2"}, []string{s.origin.Host}, nil)
	n1, n2 := nodes["bypass-1"], nodes["bypass-2"]

	s.createPod(t, ctx, podSpec{ns: "tenant-a", name: "bypass-a", node: n1.Name, image: s.private, secret: "regcred"})
	s.waitPod(t, ctx, n1, "tenant-a", "bypass-a", "Succeeded", succeeded(t))
	if m, raw := pulledRecordMapping(t, n1, s.origin.Host+"/"+s.privateRepo); m == nil || m["kubernetesSecrets"] == nil {
		t.Errorf("bypass-1: after tenant A's pull, no record naming its secret for %s:\n%s", s.private, raw)
	}

	s.createPod(t, ctx, podSpec{ns: "tenant-b", name: "bypass-b1", node: n1.Name, image: s.private})
	s.waitPod(t, ctx, n1, "tenant-b", "bypass-b1", "Succeeded (the bypass: no secret, image from the mirror)", succeeded(t))
	if msgs := s.podEvents(t, ctx, "tenant-b", "bypass-b1", "Pulling"); len(msgs) == 0 {
		t.Errorf("bypass-1: the kubelet did not make tenant B pull (no Pulling event): the KEP-2535 check did not run")
	}
	s.createPod(t, ctx, podSpec{ns: "tenant-b", name: "bypass-b2", node: n2.Name, image: s.private})
	s.waitPod(t, ctx, n2, "tenant-b", "bypass-b2", "Succeeded (never pulled there before)", succeeded(t))

	for _, r := range since(t, s.origin, originBefore) {
		if r.IsBlob() {
			t.Errorf("origin served a blob request although the mirror answers: %+v", r)
		}
	}
	if n := blobReads(since(t, s.mirror, mirrorBefore)); n < 4 {
		t.Errorf("mirror served %d blob reads to containerd; want at least 4 (config and layer, on two nodes)", n)
	}
	m, raw := pulledRecordMapping(t, n1, s.origin.Host+"/"+s.privateRepo)
	if m == nil || m["nodePodsAccessible"] != true {
		t.Errorf("bypass-1: the record of %s does not end nodePodsAccessible:\n%s", s.private, raw)
	}
	t.Logf("origin saw %d requests during the scene (none a blob); record on bypass-1: %s", len(since(t, s.origin, originBefore)), strings.TrimSpace(raw))
}

// TestShimStopsTheBypass is the same scene with "pullrecords shim" in front
// of each node's containerd: tenant B is refused on both nodes with the
// origin's host and reason in the CRI error, tenant A runs with its layers
// from the mirror while the origin sees only manifest requests, the public
// image runs for tenant C, and a tenant-A pull with imagePullPolicy Always
// within the TTL makes no new origin request.
func TestShimStopsTheBypass(t *testing.T) {
	s := sharedScene(t)
	ctx := shimContext(t)
	shims := map[string]*shimProc{}
	nodes := s.startNodes(t, ctx, []string{"shim-1", "shim-2"}, []string{s.origin.Host}, shims)
	n1, n2 := nodes["shim-1"], nodes["shim-2"]
	originBefore := countRequests(t, s.origin)
	mirrorBefore := countRequests(t, s.mirror)

	s.createPod(t, ctx, podSpec{ns: "tenant-a", name: "shim-a", node: n1.Name, image: s.private, secret: "regcred"})
	s.waitPod(t, ctx, n1, "tenant-a", "shim-a", "Succeeded", succeeded(t))
	origin := since(t, s.origin, originBefore)
	manifests := 0
	for _, r := range origin {
		switch {
		case r.IsBlob():
			t.Errorf("origin served a blob with the shim in front (layers must come from the mirror): %+v", r)
		case r.IsManifest():
			manifests++
		}
	}
	if manifests == 0 {
		t.Errorf("origin saw no manifest request for tenant A's pull: the shim did not verify at the origin (requests: %+v)", origin)
	}
	if n := blobReads(since(t, s.mirror, mirrorBefore)); n < 2 {
		t.Errorf("mirror served %d blob reads to containerd; want the config and the layer", n)
	}

	for _, p := range []struct {
		name string
		node *nodetest.Node
	}{{"shim-b1", n1}, {"shim-b2", n2}} {
		s.createPod(t, ctx, podSpec{ns: "tenant-b", name: p.name, node: p.node.Name, image: s.private})
		s.waitPod(t, ctx, p.node, "tenant-b", p.name, "refused (ErrImagePull/ImagePullBackOff)", pullRefused(t))
		msg := s.refusalNaming(t, ctx, "tenant-b", p.name, s.private, s.origin.Host, "denied", "unauthorized", "401")
		t.Logf("%s: %s", p.name, msg)
	}
	// The refused pods retry in back-off, each retry an anonymous check at
	// the origin: remove them, so that the origin requests counted below
	// are the Always pod's alone.
	s.deletePodAndWait(t, ctx, "tenant-b", "shim-b1")
	s.deletePodAndWait(t, ctx, "tenant-b", "shim-b2")

	s.createPod(t, ctx, podSpec{ns: "tenant-c", name: "shim-c", node: n1.Name, image: s.publicImage})
	s.waitPod(t, ctx, n1, "tenant-c", "shim-c", "Succeeded (public image)", succeeded(t))

	// Always: the kubelet pulls on every start; the shim's stamp answers.
	s.createPod(t, ctx, podSpec{ns: "tenant-a", name: "shim-always", node: n1.Name, image: s.private, secret: "regcred",
		policy: corev1.PullAlways, restart: corev1.RestartPolicyOnFailure, args: []string{"-exit-after", "0s", "-exit-code", "1"}})
	s.waitPod(t, ctx, n1, "tenant-a", "shim-always", "first start", func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount >= 1 || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil {
				return true
			}
		}
		return false
	})
	afterFirst := countRequests(t, s.origin)
	pullsBefore := len(s.podEvents(t, ctx, "tenant-a", "shim-always", "Pulling"))
	s.waitPod(t, ctx, n1, "tenant-a", "shim-always", "restarted twice", func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount >= 2 {
				return true
			}
		}
		return false
	})
	if got := since(t, s.origin, afterFirst); len(got) != 0 {
		t.Errorf("restarts with imagePullPolicy Always within the TTL reached the origin: %+v", got)
	}
	// Events of the same reason are aggregated; the count is on the Event.
	if pulls := len(s.podEvents(t, ctx, "tenant-a", "shim-always", "Pulling")); pulls == 0 || pullsBefore == 0 {
		t.Errorf("no Pulling events for the Always pod (%d, %d): the kubelet did not ask to pull", pullsBefore, pulls)
	}
	// fsck reads the records the shims kept, each shim stopped first so
	// that no write is under way; the kubelets stop in the clean-up.
	for name, p := range shims {
		p.stop()
		if code, out, err := p.fsck(ctx); err != nil || code != 0 {
			t.Errorf("shim %s: pullrecords fsck = %d, %v:\n%s", name, code, err, out)
		}
	}
}

// slowOrigin is a reverse proxy in front of the origin that holds manifest
// requests while hold is set, so that a verification is in flight.
type slowOrigin struct {
	srv      *httptest.Server
	hold     atomic.Bool
	inFlight atomic.Int32
	release  chan struct{}
}

func newSlowOrigin(t *testing.T, origin *nodetest.Registry) *slowOrigin {
	target, _ := url.Parse(origin.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	so := &slowOrigin{release: make(chan struct{})}
	so.hold.Store(true)
	so.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/manifests/") && so.hold.Load() {
			so.inFlight.Add(1)
			select {
			case <-so.release:
			case <-r.Context().Done():
				so.inFlight.Add(-1)
				return
			}
			so.inFlight.Add(-1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(so.srv.Close)
	return so
}

func (so *slowOrigin) host() string { return strings.TrimPrefix(so.srv.URL, "http://") }

func (so *slowOrigin) releaseAll() {
	so.hold.Store(false)
	close(so.release)
}

// TestShimKilledDuringVerification kills the shim (SIGKILL) while the
// origin holds a verification, and starts it again on the same state: the
// kubelet retries, the pod without the secret never runs, tenant A's pod
// runs, and "pullrecords fsck" finds the shim's records sound.
func TestShimKilledDuringVerification(t *testing.T) {
	s := sharedScene(t)
	ctx := shimContext(t)
	slow := newSlowOrigin(t, s.origin)
	image := slow.host() + "/" + s.privateRepo + ":v1"
	if err := s.createSecret(ctx, "tenant-a", "regcred-slow", slow.host()); err != nil {
		t.Fatal(err)
	}
	shims := map[string]*shimProc{}
	nodes := s.startNodes(t, ctx, []string{"kill-1"}, []string{slow.host()}, shims)
	n, shim := nodes["kill-1"], shims["kill-1"]

	s.createPod(t, ctx, podSpec{ns: "tenant-a", name: "kill-a", node: n.Name, image: image, secret: "regcred-slow"})
	s.createPod(t, ctx, podSpec{ns: "tenant-b", name: "kill-b", node: n.Name, image: image})
	deadline := time.Now().Add(2 * time.Minute)
	for slow.inFlight.Load() == 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("no verification reached the origin in time\n%s", lastLines(shim.logPath(), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	held := slow.inFlight.Load()
	shim.kill()
	t.Logf("shim killed with %d manifest requests held at the origin", held)
	if err := shim.start(ctx); err != nil {
		t.Fatal(err)
	}
	slow.releaseAll()

	s.waitPod(t, ctx, n, "tenant-a", "kill-a", "Succeeded after the shim's restart", succeeded(t))
	s.waitPod(t, ctx, n, "tenant-b", "kill-b", "refused", pullRefused(t))
	// Once more after tenant A's success: still refused, never run.
	s.refusalNaming(t, ctx, "tenant-b", "kill-b", image, slow.host(), "denied", "unauthorized", "401")
	s.waitPod(t, ctx, n, "tenant-b", "kill-b", "still refused", pullRefused(t))

	shim.stop()
	if _, err := os.Stat(filepath.Join(shim.stateDir(), "image_manager", "pulled")); err != nil {
		t.Errorf("the shim kept no pulled records in its state directory: %v", err)
	}
	code, out, err := shim.fsck(ctx)
	if err != nil || code != 0 {
		t.Errorf("pullrecords fsck --kubelet-dir %s after the kill = %d, %v:\n%s", shim.stateDir(), code, err, out)
	}
}

// TestShimOriginDown: with the origin stopped (the mirror still serving
// the image), a pull with the right secret is refused, and the CRI error
// names the origin's host: the shim fails closed.
func TestShimOriginDown(t *testing.T) {
	s := sharedScene(t)
	ctx := shimContext(t)
	down, err := nodetest.StartRegistry(ctx, t.TempDir(), s.auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Stop)
	image := down.Host + "/" + s.privateRepo + ":v1"
	if _, err := nodetest.PushImage(ctx, down, image, s.privateFiles, []string{"/pause"}, s.auth); err != nil {
		t.Fatal(err)
	}
	if err := s.createSecret(ctx, "tenant-a", "regcred-down", down.Host); err != nil {
		t.Fatal(err)
	}
	shims := map[string]*shimProc{}
	nodes := s.startNodes(t, ctx, []string{"down-1"}, []string{down.Host}, shims)
	n := nodes["down-1"]
	down.Stop()

	s.createPod(t, ctx, podSpec{ns: "tenant-a", name: "down-a", node: n.Name, image: image, secret: "regcred-down"})
	s.waitPod(t, ctx, n, "tenant-a", "down-a", "refused (origin down)", pullRefused(t))
	msg := s.refusalNaming(t, ctx, "tenant-a", "down-a", image, down.Host, "unreachable", "connection refused", "unavailable")
	t.Logf("refusal with the origin down: %s", msg)
}

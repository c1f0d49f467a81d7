package kubeletadapter_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/images"
)

// step is one thing that happens on the node: a pod asking for an image, or
// something else (preload, image GC, a restart).
type step struct {
	name    string
	pod     *pod
	do      func(n *node)
	restart bool // restart the kubelet with the scenario's second wiring
}

type scenario struct {
	name      string
	policy    kubeletconfig.ImagePullCredentialsVerificationPolicy
	allowlist []string
	private   []string // registries refusing anonymous pulls
	steps     []step
}

type run struct {
	Outcomes []outcome
	Files    map[string]string
}

// play runs sc on a fresh node with wiring first, restarting into second at
// every restart step.
func play(t *testing.T, sc scenario, first, second wiring) run {
	t.Helper()
	rt := newFakeRuntime()
	for _, r := range sc.private {
		rt.private[r] = true
	}
	dir := t.TempDir()
	policy := sc.policy
	if policy == "" {
		policy = kubeletconfig.NeverVerifyPreloadedImages
	}
	n := newNode(t, first, dir, rt, policy, sc.allowlist)
	var r run
	for i, s := range sc.steps {
		name := fmt.Sprintf("%d %s", i, s.name)
		switch {
		case s.restart:
			n.start(second)
			r.Outcomes = append(r.Outcomes, outcome{Step: name})
		case s.do != nil:
			s.do(n)
			r.Outcomes = append(r.Outcomes, outcome{Step: name, Pulls: rt.takePulls()})
		default:
			r.Outcomes = append(r.Outcomes, n.ensure(name, *s.pod))
		}
	}
	r.Files = files(t, dir)
	return r
}

// compare plays sc in every wiring and demands the kubelet's outcomes and
// files from each.
func compare(t *testing.T, sc scenario) {
	t.Helper()
	enableGate(t)
	want := play(t, sc, kubelet, kubelet)
	logRun(t, want)
	for _, w := range []wiring{library, mixed} {
		got := play(t, sc, w, w)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: %s differs from the kubelet (-kubelet +%s):\n%s", sc.name, w, w, diff)
		}
	}
}

const (
	privateReg = "registry.example"
	privateImg = privateReg + "/team/app:1"
)

var (
	secretA        = dockerSecret("ns1", "pull", "uid-a", privateReg, "pw1")
	secretSameInB  = dockerSecret("ns2", "other-name", "uid-b", privateReg, "pw1")
	secretRotatedA = dockerSecret("ns1", "pull", "uid-a", privateReg, "pw2")
	secretWrongC   = dockerSecret("ns3", "guess", "uid-c", privateReg, "nope")
)

func ifNotPresent(ns, name, image string, secrets ...v1.Secret) *pod {
	return &pod{ns: ns, name: name, image: image, policy: v1.PullIfNotPresent, secrets: secrets}
}

func never(ns, name, image string, secrets ...v1.Secret) *pod {
	return &pod{ns: ns, name: name, image: image, policy: v1.PullNever, secrets: secrets}
}

func always(ns, name, image string, secrets ...v1.Secret) *pod {
	return &pod{ns: ns, name: name, image: image, policy: v1.PullAlways, secrets: secrets}
}

func secretSteps() []step {
	return []step{
		{name: "private pull with a secret", pod: ifNotPresent("ns1", "a", privateImg, secretA)},
		{name: "same pod again", pod: ifNotPresent("ns1", "a2", privateImg, secretA)},
		{name: "another pod without credentials, Never", pod: never("ns1", "b", privateImg)},
		{name: "another pod without credentials, IfNotPresent", pod: ifNotPresent("ns1", "b2", privateImg)},
		{name: "same secret content in another namespace", pod: ifNotPresent("ns2", "c", privateImg, secretSameInB)},
		{name: "rotated secret, same coordinates", pod: ifNotPresent("ns1", "d", privateImg, secretRotatedA)},
		{name: "old content after rotation", pod: never("ns1", "d2", privateImg, secretA)},
		{name: "other secret, other namespace", pod: ifNotPresent("ns3", "e", privateImg, secretWrongC)},
		{name: "Always pulls", pod: always("ns1", "f", privateImg, secretA)},
	}
}

func TestSecrets(t *testing.T) {
	compare(t, scenario{name: "secrets", private: []string{privateReg}, steps: secretSteps()})
}

func TestShortNames(t *testing.T) {
	spellings := []string{
		"busybox",
		"busybox:1.36",
		"library/busybox:1",
		"docker.io/busybox",
		"docker.io/library/busybox:1.36",
		"localhost:5000/x/y:1",
		"busybox:1.36@sha256:" + digest1,
		"busybox@sha256:" + digest1,
	}
	hub := dockerSecret("ns1", "hub", "uid-hub", "docker.io", "pw")
	local := dockerSecret("ns1", "local", "uid-local", "localhost:5000", "pw")
	hubOther := dockerSecret("ns2", "hub2", "uid-hub2", "docker.io", "pw")
	for _, policy := range []v1.PullPolicy{v1.PullIfNotPresent, v1.PullNever} {
		for _, image := range spellings {
			t.Run(string(policy)+"/"+image, func(t *testing.T) {
				mk := func(ns, name string, secrets ...v1.Secret) *pod {
					return &pod{ns: ns, name: name, image: image, policy: policy, secrets: secrets}
				}
				compare(t, scenario{
					name:    image,
					private: []string{"docker.io", "localhost:5000"},
					steps: []step{
						{name: "pull with a secret", pod: ifNotPresent("ns1", "a", image, hub, local)},
						{name: "same content secret elsewhere", pod: mk("ns2", "b", hubOther)},
						{name: "no credentials", pod: mk("ns3", "c")},
						{name: "other spelling, no credentials", pod: mk("ns3", "d")},
					},
				})
			})
		}
	}
}

const digest1 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestPreloaded: an image on the node before the kubelet pulled it, under
// each policy.
func TestPreloaded(t *testing.T) {
	const preloaded = privateReg + "/base/os:1"
	for _, policy := range []kubeletconfig.ImagePullCredentialsVerificationPolicy{
		kubeletconfig.NeverVerify, kubeletconfig.NeverVerifyPreloadedImages,
		kubeletconfig.NeverVerifyAllowlistedImages, kubeletconfig.AlwaysVerify,
	} {
		t.Run(string(policy), func(t *testing.T) {
			var allow []string
			if policy == kubeletconfig.NeverVerifyAllowlistedImages {
				allow = []string{privateReg + "/base/*"}
			}
			compare(t, scenario{
				name: string(policy), policy: policy, allowlist: allow, private: []string{privateReg},
				steps: []step{
					{name: "preload", do: func(n *node) { n.rt.preload(preloaded) }},
					{name: "no credentials, Never", pod: never("ns1", "a", preloaded)},
					{name: "no credentials, IfNotPresent", pod: ifNotPresent("ns1", "b", preloaded)},
					{name: "with a secret", pod: ifNotPresent("ns1", "c", preloaded, secretA)},
					{name: "no credentials after a credentialed pull", pod: never("ns2", "d", preloaded)},
					{name: "private image", pod: ifNotPresent("ns1", "e", privateImg, secretA)},
					{name: "private image, no credentials", pod: never("ns2", "f", privateImg)},
				},
			})
		})
	}
}

// TestImageGC: the image GC hook prunes records of images the runtime no
// longer has.
func TestImageGC(t *testing.T) {
	other := privateReg + "/team/other:2"
	compare(t, scenario{name: "gc", private: []string{privateReg}, steps: []step{
		{name: "pull one", pod: ifNotPresent("ns1", "a", privateImg, secretA)},
		{name: "pull two", pod: ifNotPresent("ns1", "b", other, secretA)},
		{name: "runtime removes one", do: func(n *node) { n.rt.remove(other) }},
		{name: "gc hook", do: func(n *node) {
			// As the image GC calls its hooks: the start time is taken
			// before the image list.
			until := time.Now().Add(2 * time.Second)
			var hook images.PostImageGCHook = n.pm.PruneUnknownRecords
			hook(n.ctx, n.rt.imageIDs(), until)
		}},
		{name: "re-pull the removed one, no credentials", pod: ifNotPresent("ns2", "c", other)},
		{name: "kept one, no credentials", pod: never("ns2", "d", privateImg)},
	}})
}

// TestRestart: a kubelet of one kind stops, one of another kind starts over
// the same directory and runtime, and the node behaves as if the kubelet
// had been the kubelet's own both times.
func TestRestart(t *testing.T) {
	enableGate(t)
	leftover := privateReg + "/team/crashed:1"
	steps := append(secretSteps()[:5],
		step{name: "crash during a pull: intent written, image arrives", do: func(n *node) {
			if err := n.pm.RecordPullIntent(klog.FromContext(n.ctx), leftover); err != nil {
				n.t.Fatal(err)
			}
			n.rt.preload(leftover)
		}},
		step{name: "restart", restart: true},
	)
	steps = append(steps, secretSteps()[5:]...)
	steps = append(steps,
		step{name: "leftover image, no credentials", pod: never("ns9", "x", leftover)},
		step{name: "first image, new pod, no credentials", pod: never("ns9", "y", privateImg)},
	)
	sc := scenario{name: "restart", private: []string{privateReg}, steps: steps}
	want := play(t, sc, kubelet, kubelet)
	for _, pair := range [][2]wiring{{kubelet, library}, {library, kubelet}, {kubelet, mixed}, {mixed, library}, {library, library}} {
		got := play(t, sc, pair[0], pair[1])
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s then %s differs from the kubelet twice (-want +got):\n%s", pair[0], pair[1], diff)
		}
	}
}

// logRun shows what the kubelet did, with -v.
func logRun(t *testing.T, r run) {
	t.Helper()
	if !testing.Verbose() {
		return
	}
	for _, o := range r.Outcomes {
		t.Logf("%s: ref=%q err=%q pulls=%q events=%q", o.Step, o.ImageRef, o.Err, o.Pulls, o.Events)
	}
	for name, content := range r.Files {
		t.Logf("%s: %s", name, content)
	}
}

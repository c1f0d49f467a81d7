package kubeletadapter_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/kubeletadapter"
)

// expiryScene is a node whose owner turned on credentialExpiry, with a
// private registry and a clock the test moves.
type expiryScene struct {
	t     *testing.T
	clock *testingclock.FakeClock
	rt    *fakeRuntime
	n     *node
}

const expiryTTL = time.Hour

func newExpiryScene(t *testing.T, w wiring) *expiryScene {
	t.Helper()
	enableGate(t)
	s := &expiryScene{t: t, clock: testingclock.NewFakeClock(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)), rt: newFakeRuntime()}
	s.rt.private[privateReg] = true
	dir := t.TempDir()
	writeNodeConfig(t, dir, configHeader+"credentialExpiry: 1h\n")
	_, ctx := ktesting.NewTestContext(t)
	s.n = &node{t: t, ctx: ctx, dir: dir, rt: s.rt, policy: kubeletconfig.NeverVerifyPreloadedImages, extra: []kubeletadapter.Option{kubeletadapter.WithClock(s.clock)}}
	s.n.start(w)
	return s
}

// expect runs p and checks whether it pulled and whether it failed with
// the kubelet error wantErr ("" for none).
func (s *expiryScene) expect(step string, p *pod, wantPull bool, wantErr string) outcome {
	s.t.Helper()
	o := s.n.ensure(step, *p)
	pulled := len(o.Pulls) > 0
	switch {
	case pulled != wantPull:
		s.t.Errorf("%s (+%v): pulls %q, want a pull: %v (err %q)", step, s.clock.Since(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)), o.Pulls, wantPull, o.Err)
	case wantErr == "" && o.Err != "":
		s.t.Errorf("%s: err %q, want the pod to start", step, o.Err)
	case wantErr != "" && !strings.Contains(o.Err, wantErr):
		s.t.Errorf("%s: err %q, want %s", step, o.Err, wantErr)
	}
	return o
}

// With credentialExpiry, a secret that pulled an image vouches for it for
// the TTL; then its pod pulls again (and a successful pull renews it), so a
// credential the registry revoked stops working within the TTL. The stock
// kubelet, on the same steps, keeps letting the revoked secret's pods use
// the image. The record is never deleted: without a secret, the image never
// looks preloaded.
func TestCredentialExpiry(t *testing.T) {
	fork := newExpiryScene(t, library)
	fork.expect("team pulls with its secret", ifNotPresent("ns1", "a", privateImg, secretA), true, "")
	if proofs, err := os.ReadDir(kubeletadapter.CredentialProofsDir(fork.n.dir)); err != nil || len(proofs) != 1 {
		t.Errorf("%s holds %d entries (%v), want the pull's proof", kubeletadapter.CredentialProofsDir(fork.n.dir), len(proofs), err)
	}
	fork.expect("again: the proof is fresh", ifNotPresent("ns1", "b", privateImg, secretA), false, "")
	fork.clock.Step(expiryTTL - time.Minute)
	fork.expect("a minute before the TTL", ifNotPresent("ns1", "c", privateImg, secretA), false, "")
	fork.clock.Step(time.Minute)
	fork.expect("at the TTL: pulls again", ifNotPresent("ns1", "d", privateImg, secretA), true, "")
	fork.expect("renewed by that pull", ifNotPresent("ns1", "e", privateImg, secretA), false, "")
	fork.expect("same content under another secret: accepted by hash, no pull", ifNotPresent("ns2", "f", privateImg, secretSameInB), false, "")

	// The registry revokes the password; within the TTL it still vouches
	// (the stated bound), past it the pod is refused.
	fork.rt.revoked["pw1"] = true
	fork.clock.Step(expiryTTL)
	fork.expect("revoked, past the TTL", ifNotPresent("ns1", "g", privateImg, secretA), true, "ErrImagePull")
	fork.expect("revoked, past the TTL, Never", never("ns1", "h", privateImg, secretA), false, "ErrImageNeverPull")
	fork.expect("another tenant, no secret, Never: the image does not look preloaded", never("ns3", "i", privateImg), false, "ErrImageNeverPull")
	fork.expect("the same-content secret expired with it", never("ns2", "j", privateImg, secretSameInB), false, "ErrImageNeverPull")

	// A restart keeps it expired.
	fork.n.start(library)
	fork.expect("after a restart, still expired", never("ns1", "k", privateImg, secretA), false, "ErrImageNeverPull")

	// The stock kubelet on the same story lets the revoked secret through.
	stock := newExpiryScene(t, kubelet)
	stock.expect("team pulls with its secret", ifNotPresent("ns1", "a", privateImg, secretA), true, "")
	stock.rt.revoked["pw1"] = true
	stock.clock.Step(10 * expiryTTL)
	stock.expect("stock: revoked, ten TTLs later, no pull, runs", ifNotPresent("ns1", "g", privateImg, secretA), false, "")

	// The kubelet's directory holds only the kubelet's files (the proofs
	// are beside it, and the restart pruned the expired ones).
	var names []string
	entries, err := os.ReadDir(filepath.Join(fork.n.dir, "image_manager"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if got := strings.Join(names, " "); got != ".pullrecords.lock pulled pulling" {
		t.Errorf("image_manager holds %q, want the kubelet's pulled and pulling and the library's lock file", got)
	}
}

// Switch-over fork -> stock -> fork on one root directory: the stock
// kubelet reads the directory as its own and ignores the proofs; pulls it
// makes meanwhile prove nothing to the fork, and proofs the fork made
// before still hold until their TTL.
func TestCredentialExpirySwitchOver(t *testing.T) {
	s := newExpiryScene(t, library)
	s.expect("fork: pull with the secret", ifNotPresent("ns1", "a", privateImg, secretA), true, "")
	s.n.start(kubelet)
	s.expect("stock: uses it, no pull", ifNotPresent("ns1", "b", privateImg, secretA), false, "")
	s.expect("stock: another image pulled with the secret", ifNotPresent("ns1", "c", privateReg+"/team/other:1", secretA), true, "")
	s.clock.Step(expiryTTL / 2)
	s.n.start(library)
	s.expect("fork again: the proof from before the switch holds", ifNotPresent("ns1", "d", privateImg, secretA), false, "")
	s.expect("fork again: the stock kubelet's pull proves nothing", ifNotPresent("ns1", "e", privateReg+"/team/other:1", secretA), true, "")
	s.expect("fork again: that pull proved it", ifNotPresent("ns1", "f", privateReg+"/team/other:1", secretA), false, "")
	s.clock.Step(expiryTTL / 2)
	s.expect("fork: past the TTL of the first pull", ifNotPresent("ns1", "g", privateImg, secretA), true, "")
	s.n.start(kubelet)
	s.expect("stock once more: reads the directory", never("ns1", "h", privateImg, secretA), false, "")
	s.expect("stock once more: no secret, Never", never("ns3", "i", privateImg), false, "ErrImageNeverPull")
}

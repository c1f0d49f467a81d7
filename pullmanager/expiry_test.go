package pullmanager

import (
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/memstore"
)

const (
	expiryImage = "registry.example/team/app:v1"
	expiryRef   = "sha256:app1"
	expiryTTL   = time.Hour
)

// newExpiringManager is a manager with credential expiry over memory, its
// clock and its proofs' clock the same fake clock.
func newExpiringManager(t *testing.T) (*PullManager, *testingclock.FakeClock, *credstamp.Store) {
	t.Helper()
	ctx, logger := testCtx(t)
	clk := testingclock.NewFakeClock(t0)
	stamps, err := credstamp.Open(logger, t.TempDir(), credstamp.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stamps.Close() })
	m, err := NewImagePullManager(ctx, memstore.New(), mustPolicy(t, AlwaysVerify), nil, WithClock(clk), WithCredentialExpiry(expiryTTL, stamps))
	if err != nil {
		t.Fatal(err)
	}
	return m, clk, stamps
}

func pulledWith(t *testing.T, m *PullManager, creds *accessor.ImagePullCredentials) {
	t.Helper()
	ctx, logger := testCtx(t)
	if err := m.RecordPullIntent(logger, expiryImage); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(ctx, expiryImage, expiryRef, creds)
}

func withPod(secrets []accessor.ImagePullSecret, account *accessor.ImagePullServiceAccount) GetPodCredentials {
	return func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return secrets, account, nil
	}
}

// An expired secret or service account is explained as such, and the
// explanation names the secret, never its hash.
func TestExplainExpiredCredentials(t *testing.T) {
	ctx, _ := testCtx(t)
	m, clk, _ := newExpiringManager(t)
	s1 := secret("u1", "team", "pull", "hash-of-team-credential")
	robot := sa("sa-uid", "team", "robot")
	pulledWith(t, m, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s1}})
	pulledWith(t, m, &accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{robot}})

	fresh := m.ExplainImagePull(ctx, expiryImage, expiryRef, withPod([]accessor.ImagePullSecret{s1}, nil))
	if fresh.MustPull || fresh.DecidedAt != StepSecretMatch {
		t.Fatalf("within the TTL: must pull %v at %v, want may use at SecretMatch", fresh.MustPull, fresh.DecidedAt)
	}
	clk.Step(expiryTTL)
	for name, pod := range map[string]GetPodCredentials{
		"secret":          withPod([]accessor.ImagePullSecret{s1}, nil),
		"service account": withPod(nil, &robot),
	} {
		e := m.ExplainImagePull(ctx, expiryImage, expiryRef, pod)
		if !e.MustPull || e.DecidedAt != StepNoMatch || e.Rule != "matching credentials expired" {
			t.Errorf("%s past the TTL: must pull %v at %v rule %q; want must pull at NoMatch, matching credentials expired", name, e.MustPull, e.DecidedAt, e.Rule)
		}
		var said []string
		for _, st := range e.Steps {
			said = append(said, st.Finding)
		}
		all := strings.Join(said, "\n")
		if !strings.Contains(all, "credential expiry") || !strings.Contains(all, "team/") {
			t.Errorf("%s: the steps do not say which credential expired:\n%s", name, all)
		}
		if strings.Contains(all, s1.CredentialHash) {
			t.Errorf("%s: the explanation shows a credential hash:\n%s", name, all)
		}
		got, err := m.MustAttemptImagePull(ctx, expiryImage, expiryRef, pod)
		if !got || err != nil {
			t.Errorf("%s past the TTL: MustAttemptImagePull = %v, %v; want true, nil (explanation and check disagree)", name, got, err)
		}
	}
}

// A secret rotated in place (same coordinates, new content) is accepted by
// its coordinates while the old content's proof is fresh, and then vouches
// exactly as long as that proof: inheriting never extends trust.
func TestRotatedSecretInheritsItsProof(t *testing.T) {
	ctx, _ := testCtx(t)
	m, clk, _ := newExpiringManager(t)
	old := secret("u1", "team", "pull", "old-content")
	rotated := secret("u1", "team", "pull", "new-content")
	pulledWith(t, m, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{old}})
	check := func(when string, s accessor.ImagePullSecret, want bool) {
		t.Helper()
		got, err := m.MustAttemptImagePull(ctx, expiryImage, expiryRef, withPod([]accessor.ImagePullSecret{s}, nil))
		if err != nil || got != want {
			t.Errorf("%s: MustAttemptImagePull = %v, %v; want %v", when, got, err, want)
		}
	}
	clk.Step(30 * time.Minute)
	check("rotated, 30m after the pull with the old content", rotated, false)
	clk.Step(29 * time.Minute)
	check("rotated, 59m after: the inherited proof is fresh", rotated, false)
	clk.Step(time.Minute)
	check("rotated, 60m after: expired with the proof it inherited", rotated, true)
	pulledWith(t, m, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{rotated}})
	check("rotated, after its own pull", rotated, false)
}

// A proof that cannot be written costs a pull, never access.
func TestUnwritableProofCostsAPull(t *testing.T) {
	ctx, _ := testCtx(t)
	m, _, stamps := newExpiringManager(t)
	s1 := secret("u1", "team", "pull", "team-content")
	stamps.Close() // every later Stamp fails
	pulledWith(t, m, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s1}})
	if rec, ok, err := m.records.GetImagePulledRecord(expiryRef); err != nil || !ok || len(rec.CredentialMapping) == 0 {
		t.Fatalf("the record was not written: %v %v %v", rec, ok, err)
	}
	got, err := m.MustAttemptImagePull(ctx, expiryImage, expiryRef, withPod([]accessor.ImagePullSecret{s1}, nil))
	if !got || err != nil {
		t.Errorf("with its proof unwritten, the secret vouched: MustAttemptImagePull = %v, %v; want true", got, err)
	}
}

package pullmanager

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
)

const (
	imgX   = "registry.example/team/app:v1"
	keyX   = "registry.example/team/app"
	imgY   = "other.example/mirror/app:v1"
	keyY   = "other.example/mirror/app"
	refA   = "sha256:aaaa"
	hashOK = "hash-ok"
)

// decisionRow is one row of the decision table shared by
// TestMustAttemptImagePull and TestExplainImagePullAgrees.
type decisionRow struct {
	name       string
	step       Step // the deciding step (Explanation.DecidedAt)
	policy     VerificationPolicy
	allowlist  []string
	protect    bool
	normalized bool // WithNormalizedImageNames
	record     *accessor.ImagePulledRecord
	intent     string // stored intent
	inFlight   string // RecordPullIntent made by this process
	fail       map[string]error
	image      string
	imageRef   string
	podSecrets []accessor.ImagePullSecret
	podSA      *accessor.ImagePullServiceAccount
	podErr     error

	want          bool
	wantErr       bool
	wantCredCalls int
	wantResult    string // "" = no metric recorded
	wantRecord    *accessor.ImagePulledRecord
}

// decisionRows covers every Step of the 14-step decision (the kubelet's
// MustAttemptImagePull in pkg/kubelet/images/pullmanager/image_pull_manager.go),
// whether the pod's credentials are asked for, the result label, and the
// record after the check (check-time writes).
func decisionRows() []decisionRow {
	s1 := secret("uid1", "ns1", "pull1", hashOK)
	many := func(n int) []accessor.ImagePullSecret {
		out := make([]accessor.ImagePullSecret, n)
		for i := range out {
			out[i] = secret(fmt.Sprintf("u%03d", i), "ns", fmt.Sprintf("s%03d", i), fmt.Sprintf("h%03d", i))
		}
		return out
	}
	withSecrets := func(ss ...accessor.ImagePullSecret) map[string]accessor.ImagePullCredentials {
		return map[string]accessor.ImagePullCredentials{keyX: {KubernetesSecrets: ss}}
	}
	return []decisionRow{
		{name: "step 1: image not present", step: 1, policy: AlwaysVerify, image: imgX, imageRef: "", want: true},
		{name: "step 4: record read error fails safe", step: 4, policy: NeverVerify, image: imgX, imageRef: refA,
			fail: map[string]error{"GetImagePulledRecord": errInjected}, want: true, wantResult: ResultError},
		{name: "step 4: intent read error fails safe", step: 4, policy: NeverVerify, image: imgX, imageRef: refA,
			fail: map[string]error{"ImagePullIntentExists": errInjected}, want: true, wantResult: ResultError},
		{name: "step 6: an in-flight pull counts as pulled without reading the intent", step: 6, policy: NeverVerifyPreloadedImages,
			inFlight: imgX, fail: map[string]error{"ImagePullIntentExists": errInjected}, image: imgX, imageRef: refA,
			want: true, wantResult: ResultMustAuthenticate},
		{name: "step 5: NeverVerify with only an intent", step: 5, policy: NeverVerify, intent: imgX, image: imgX, imageRef: refA,
			want: false, wantResult: ResultCredentialPolicyAllowed},
		{name: "step 5: preloaded image under NeverVerifyPreloadedImages", step: 5, policy: NeverVerifyPreloadedImages,
			image: imgX, imageRef: refA, want: false, wantResult: ResultCredentialPolicyAllowed},
		{name: "step 5: allowlisted image pulled with a secret", step: 5, policy: NeverVerifyAllowlistedImages,
			allowlist: []string{"registry.example/team/*"}, record: rec(refA, t0, withSecrets(s1)),
			image: imgX, imageRef: refA, want: false, wantResult: ResultCredentialPolicyAllowed},
		{name: "step 6: NeverVerifyPreloadedImages with only an intent", step: 6, policy: NeverVerifyPreloadedImages,
			intent: imgX, image: imgX, imageRef: refA, want: true, wantResult: ResultMustAuthenticate},
		{name: "step 6: AlwaysVerify without records", step: 6, policy: AlwaysVerify, image: imgX, imageRef: refA,
			want: true, wantResult: ResultMustAuthenticate},
		{name: "step 7: unparsable image name", step: 7, policy: AlwaysVerify, record: rec(refA, t0, withSecrets(s1)),
			image: "UPPER/Case:bad", imageRef: refA, want: true, wantResult: ResultError},
		{name: "step 8: record only under another name", step: 8, policy: AlwaysVerify,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{keyY: {KubernetesSecrets: []accessor.ImagePullSecret{s1}}}),
			image:  imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{s1}, want: true, wantResult: ResultMustAuthenticate},
		{name: "step 8: empty mapping", step: 8, policy: AlwaysVerify, record: rec(refA, t0, nil),
			image: imgX, imageRef: refA, want: true, wantResult: ResultMustAuthenticate},
		{name: "step 9: node-wide entry, credentials never asked", step: 9, policy: AlwaysVerify,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {NodePodsAccessible: true}}),
			image:  imgX, imageRef: refA, want: false, wantResult: ResultCredentialRecordFound},
		{name: "step 8: a short name is not keyed by its fully qualified name", step: 8, policy: AlwaysVerify,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{"docker.io/library/busybox": {NodePodsAccessible: true}}),
			image:  "busybox", imageRef: refA, want: true, wantResult: ResultMustAuthenticate},
		{name: "step 9: a short name matches its raw key, tag cut", step: 9, policy: AlwaysVerify,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{"busybox": {NodePodsAccessible: true}}),
			image:  "busybox:1.36", imageRef: refA, want: false, wantResult: ResultCredentialRecordFound},
		{name: "step 9: normalised names: familiar name matches the fully qualified key", step: 9, policy: AlwaysVerify,
			normalized: true,
			record:     rec(refA, t0, map[string]accessor.ImagePullCredentials{"docker.io/library/busybox": {NodePodsAccessible: true}}),
			image:      "busybox", imageRef: refA, want: false, wantResult: ResultCredentialRecordFound},
		{name: "step 8: normalised names: the raw key is not looked up", step: 8, policy: AlwaysVerify,
			normalized: true,
			record:     rec(refA, t0, map[string]accessor.ImagePullCredentials{"busybox": {NodePodsAccessible: true}}),
			image:      "busybox", imageRef: refA, want: true, wantResult: ResultMustAuthenticate},
		{name: "step 10: entry without credentials", step: 10, policy: AlwaysVerify,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {}}),
			image:  imgX, imageRef: refA, want: true, wantResult: ResultMustAuthenticate},
		{name: "step 11: getPodCredentials fails", step: 11, policy: AlwaysVerify, record: rec(refA, t0, withSecrets(s1)),
			image: imgX, imageRef: refA, podErr: errInjected,
			want: true, wantErr: true, wantCredCalls: 1, wantResult: ResultError},
		{name: "step 12: same secret", step: 12, policy: AlwaysVerify, record: rec(refA, t0, withSecrets(s1)),
			image: imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{s1},
			want: false, wantCredCalls: 1, wantResult: ResultCredentialRecordFound,
			wantRecord: rec(refA, t0, withSecrets(s1))},
		{name: "step 12: same hash, other coordinates, written", step: 12, policy: AlwaysVerify, record: rec(refA, t0, withSecrets(s1)),
			image: imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{secret("uid0", "ans", "copy", hashOK)},
			want: false, wantCredCalls: 1, wantResult: ResultCredentialRecordFound,
			wantRecord: rec(refA, t0.Add(1e9), withSecrets(secret("uid0", "ans", "copy", hashOK), s1))},
		{name: "step 12: same coordinates, rotated hash, written", step: 12, policy: AlwaysVerify, record: rec(refA, t0, withSecrets(s1)),
			image: imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{secret("uid1", "ns1", "pull1", "rotated")},
			want: false, wantCredCalls: 1, wantResult: ResultCredentialRecordFound,
			wantRecord: rec(refA, t0.Add(1e9), withSecrets(secret("uid1", "ns1", "pull1", "rotated")))},
		{name: "step 12: empty hashes, same coordinates", step: 12, policy: AlwaysVerify,
			record: rec(refA, t0, withSecrets(secret("uid1", "ns1", "pull1", ""))),
			image:  imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{secret("uid1", "ns1", "pull1", "")},
			want: false, wantCredCalls: 1, wantResult: ResultCredentialRecordFound},
		{name: "step 14: empty hashes, other coordinates", step: 14, policy: AlwaysVerify,
			record: rec(refA, t0, withSecrets(secret("uid1", "ns1", "pull1", ""))),
			image:  imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{secret("uid2", "ns1", "pull2", "")},
			want: true, wantCredCalls: 1, wantResult: ResultMustAuthenticate},
		{name: "step 12: hash match at the 100 limit is accepted but not written", step: 12, policy: AlwaysVerify,
			record: rec(refA, t0, withSecrets(many(100)...)),
			image:  imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{secret("new", "new", "new", "h050")},
			want: false, wantCredCalls: 1, wantResult: ResultCredentialRecordFound,
			wantRecord: rec(refA, t0, withSecrets(many(100)...))},
		{name: "step 14: coordinates match at the 100 limit is not accepted", step: 14, policy: AlwaysVerify,
			record: rec(refA, t0, withSecrets(many(100)...)),
			image:  imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{secret("u050", "ns", "s050", "rotated")},
			want: true, wantCredCalls: 1, wantResult: ResultMustAuthenticate,
			wantRecord: rec(refA, t0, withSecrets(many(100)...))},
		{name: "step 12: coordinates match below the limit (99)", step: 12, policy: AlwaysVerify,
			record: rec(refA, t0, withSecrets(many(99)...)),
			image:  imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{secret("u050", "ns", "s050", "rotated")},
			want: false, wantCredCalls: 1, wantResult: ResultCredentialRecordFound},
		{name: "step 12: check-time write failure does not change the answer", step: 12, policy: AlwaysVerify,
			record: rec(refA, t0, withSecrets(s1)), fail: map[string]error{"WriteImagePulledRecord": errInjected},
			image: imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{secret("uid9", "ns9", "n9", hashOK)},
			want: false, wantCredCalls: 1, wantResult: ResultCredentialRecordFound,
			wantRecord: rec(refA, t0, withSecrets(s1))},
		{name: "step 13: service account match", step: 13, policy: AlwaysVerify,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {
				KubernetesSecrets:         []accessor.ImagePullSecret{s1},
				KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{sa("sauid", "ns1", "default")}}}),
			image: imgX, imageRef: refA, podSA: &accessor.ImagePullServiceAccount{UID: "sauid", Namespace: "ns1", Name: "default"},
			want: false, wantCredCalls: 1, wantResult: ResultCredentialRecordFound},
		{name: "step 14: service account with another UID", step: 14, policy: AlwaysVerify,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {
				KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{sa("sauid", "ns1", "default")}}}),
			image: imgX, imageRef: refA, podSA: &accessor.ImagePullServiceAccount{UID: "other", Namespace: "ns1", Name: "default"},
			want: true, wantCredCalls: 1, wantResult: ResultMustAuthenticate},
		{name: "step 14: pod without credentials", step: 14, policy: AlwaysVerify, record: rec(refA, t0, withSecrets(s1)),
			image: imgX, imageRef: refA, want: true, wantCredCalls: 1, wantResult: ResultMustAuthenticate},
		{name: "step 14: pod with other secret", step: 14, policy: AlwaysVerify, record: rec(refA, t0, withSecrets(s1)),
			image: imgX, imageRef: refA, podSecrets: []accessor.ImagePullSecret{secret("u", "n", "m", "wrong")},
			want: true, wantCredCalls: 1, wantResult: ResultMustAuthenticate},
		// kubernetes#138175: preloaded X, the same content pulled as Y with a secret.
		{name: "kubernetes#138175 upstream: preloaded name poisoned", step: 8, policy: NeverVerifyPreloadedImages,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{keyY: {KubernetesSecrets: []accessor.ImagePullSecret{s1}}}),
			image:  imgX, imageRef: refA, want: true, wantResult: ResultMustAuthenticate},
		{name: "kubernetes#138175 fixed: preloaded name stays usable", step: 5, policy: NeverVerifyPreloadedImages, protect: true,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{keyY: {KubernetesSecrets: []accessor.ImagePullSecret{s1}}}),
			image:  imgX, imageRef: refA, want: false, wantResult: ResultCredentialPolicyAllowed},
		{name: "kubernetes#138175 fixed: the pulled name still needs credentials", step: 14, policy: NeverVerifyPreloadedImages, protect: true,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{keyY: {KubernetesSecrets: []accessor.ImagePullSecret{s1}}}),
			image:  imgY, imageRef: refA, want: true, wantCredCalls: 1, wantResult: ResultMustAuthenticate},
		{name: "kubernetes#138175 fixed: an intent for the name still counts", step: 8, policy: NeverVerifyPreloadedImages, protect: true,
			intent: imgX,
			record: rec(refA, t0, map[string]accessor.ImagePullCredentials{keyY: {KubernetesSecrets: []accessor.ImagePullSecret{s1}}}),
			image:  imgX, imageRef: refA, want: true, wantResult: ResultMustAuthenticate},
	}
}

// newDecisionManager builds the store and manager of a row, with the
// row's in-flight pull made and its failures injected, and steps the clock
// by a second.
func newDecisionManager(t *testing.T, tc decisionRow) (*PullManager, *accessortest.FaultyAccessor, *Metrics) {
	t.Helper()
	_, logger := testCtx(t)
	store := newFaultyStore()
	if tc.record != nil {
		putRecords(t, store, tc.record)
	}
	if tc.intent != "" {
		putIntents(t, store, tc.intent)
	}
	metrics := NewMetrics()
	m, clk := newTestManager(t, store.Accessor(), mustPolicy(t, tc.policy, tc.allowlist...),
		WithMetrics(metrics), WithPreloadedImageProtection(tc.protect), WithNormalizedImageNames(tc.normalized))
	if tc.inFlight != "" {
		if err := m.RecordPullIntent(logger, tc.inFlight); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range tc.fail {
		setFail(store, k, v)
	}
	clk.Step(1e9)
	return m, store, metrics
}

// TestDecisionRowNames keeps the table honest: a row named "step N: ..."
// expects Step N.
func TestDecisionRowNames(t *testing.T) {
	for _, tc := range decisionRows() {
		var n int
		if _, err := fmt.Sscanf(tc.name, "step %d:", &n); err != nil {
			continue
		}
		if Step(n) != tc.step {
			t.Errorf("row %q expects step %d (%v)", tc.name, int(tc.step), tc.step)
		}
	}
}

// TestMustAttemptImagePull runs the decision table through the check.
func TestMustAttemptImagePull(t *testing.T) {
	for _, tc := range decisionRows() {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _ := testCtx(t)
			m, store, metrics := newDecisionManager(t, tc)
			calls := 0
			got, err := m.MustAttemptImagePull(ctx, tc.image, tc.imageRef, podCreds(&calls, tc.podSecrets, tc.podSA, tc.podErr))
			if got != tc.want {
				t.Errorf("MustAttemptImagePull = %v, want %v", got, tc.want)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("error = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, errInjected) {
				t.Errorf("error %v does not wrap the credentials error", err)
			}
			if calls != tc.wantCredCalls {
				t.Errorf("getPodCredentials called %d times, want %d", calls, tc.wantCredCalls)
			}
			wantCounts := map[string]float64{}
			if tc.wantResult != "" {
				wantCounts[tc.wantResult] = 1
			}
			if diff := cmp.Diff(wantCounts, checkCounts(metrics)); diff != "" {
				t.Errorf("check results (-want +got):\n%s", diff)
			}
			if tc.wantRecord != nil {
				setFail(store, "GetImagePulledRecord", nil)
				if diff := cmp.Diff(tc.wantRecord.ForStorage(), storedRecord(t, store, tc.imageRef)); diff != "" {
					t.Errorf("record after the check (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestMustAttemptImagePullWithoutPeeker runs a hit and a miss through a store
// that only has the eight accessor methods (copies on every read).
func TestMustAttemptImagePullWithoutPeeker(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFaultyStore()
	putRecords(t, store, rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {NodePodsAccessible: true}}))
	m, _ := newTestManager(t, store, mustPolicy(t, AlwaysVerify))
	if m.peeker != nil || m.counter != nil {
		t.Fatal("a FaultyAccessor (not its Accessor()) should hide the optional interfaces")
	}
	calls := 0
	if got, _ := m.MustAttemptImagePull(ctx, imgX, refA, podCreds(&calls, nil, nil, nil)); got {
		t.Error("node-wide record: got must pull")
	}
	if got, _ := m.MustAttemptImagePull(ctx, imgY, refA, podCreds(&calls, nil, nil, nil)); !got {
		t.Error("other name: got no pull")
	}
	if calls != 0 {
		t.Errorf("credentials asked %d times", calls)
	}
}

// TestLockFreeCheckNeverMissesRecordAndIntent: a pull is recorded (record
// written, then intent dropped) between the check's record read and its
// intent read. Upstream's locks prevent this interleaving; the lock-free
// check must still see the pull (here: through its second record read), or
// the image would look preloaded and a pod without credentials would be let
// in under NeverVerifyPreloadedImages.
func TestLockFreeCheckNeverMissesRecordAndIntent(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFaultyStore()
	putIntents(t, store, imgX) // left by the process that started the pull
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, NeverVerifyPreloadedImages))
	onFirstCall(store, "ImagePullIntentExists", func() {
		m.RecordImagePulled(ctx, imgX, refA, &accessor.ImagePullCredentials{
			KubernetesSecrets: []accessor.ImagePullSecret{secret("u", "team", "s", "h")}})
	})
	calls := 0
	got, err := m.MustAttemptImagePull(ctx, imgX, refA, podCreds(&calls, nil, nil, nil))
	if err != nil || !got {
		t.Fatalf("check = %v, %v; want must pull (the image was pulled with a secret)", got, err)
	}
	if hasIntent(t, store, imgX) || storedRecord(t, store, refA) == nil {
		t.Fatal("the hook did not record the pull")
	}
	if calls != 1 {
		t.Errorf("credentials asked %d times, want 1", calls)
	}
}

// TestNilGetPodCredentials: a nil GetPodCredentials means the pod has no
// credentials (upstream would panic).
func TestNilGetPodCredentials(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFaultyStore()
	putRecords(t, store, rec(refA, t0, map[string]accessor.ImagePullCredentials{
		keyX: {KubernetesSecrets: []accessor.ImagePullSecret{secret("u", "n", "s", "h")}}}))
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify))
	if got, err := m.MustAttemptImagePull(ctx, imgX, refA, nil); !got || err != nil {
		t.Errorf("MustAttemptImagePull(nil creds func) = %v, %v; want true, nil", got, err)
	}
}

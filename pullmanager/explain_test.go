package pullmanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/memstore"
)

// writeMethods are the store methods that change it.
var writeMethods = []string{"WriteImagePullIntent", "DeleteImagePullIntent", "WriteImagePulledRecord", "DeleteImagePulledRecord"}

func writeCalls(s *accessortest.FaultyAccessor) map[string]int {
	out := map[string]int{}
	for _, name := range writeMethods {
		if n := s.CallCount(name); n != 0 {
			out[name] = n
		}
	}
	return out
}

// TestExplainImagePullAgrees runs every row of the decision table through
// ExplainImagePull and then, on the same manager and store, through
// MustAttemptImagePull. The explanation must give the row's step and
// result, make no store write and count no metric, and agree with the check
// on the answer, the returned error, the credential lookups and whether the
// check writes the record.
func TestExplainImagePullAgrees(t *testing.T) {
	for _, tc := range decisionRows() {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _ := testCtx(t)
			m, store, metrics := newDecisionManager(t, tc)
			before := storedRecord(t, store, tc.imageRef)
			writesBefore := writeCalls(store)

			explainCalls := 0
			e := m.ExplainImagePull(ctx, tc.image, tc.imageRef, podCreds(&explainCalls, tc.podSecrets, tc.podSA, tc.podErr))
			if diff := cmp.Diff(writesBefore, writeCalls(store)); diff != "" {
				t.Errorf("ExplainImagePull called store writes (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(before, storedRecord(t, store, tc.imageRef)); diff != "" {
				t.Errorf("ExplainImagePull changed the record (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]float64{}, checkCounts(metrics)); diff != "" {
				t.Errorf("ExplainImagePull counted checks:\n%s", diff)
			}
			type summary struct {
				MustPull, Err, FailSafe, CredentialsLookedUp bool
				Result                                       string
				Step                                         Step
			}
			wantResult := tc.wantResult
			wantFailSafe := tc.wantResult == ResultError && !tc.wantErr
			got := summary{e.MustPull, e.Err != nil, e.FailSafeErr != nil, e.CredentialsLookedUp, e.Result, e.DecidedAt}
			want := summary{tc.want, tc.wantErr, wantFailSafe, tc.wantCredCalls > 0, wantResult, tc.step}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("explanation (-want +got):\n%s\nsteps: %+v", diff, e.Steps)
			}
			if tc.wantErr && !errors.Is(e.Err, errInjected) {
				t.Errorf("Err = %v, want the credentials error", e.Err)
			}
			if explainCalls != tc.wantCredCalls {
				t.Errorf("ExplainImagePull called getPodCredentials %d times, want %d", explainCalls, tc.wantCredCalls)
			}
			checkSteps(t, e)

			checkCalls := 0
			writes := store.CallCount("WriteImagePulledRecord")
			must, err := m.MustAttemptImagePull(ctx, tc.image, tc.imageRef, podCreds(&checkCalls, tc.podSecrets, tc.podSA, tc.podErr))
			wrote := store.CallCount("WriteImagePulledRecord") > writes
			check := []any{must, err, checkCalls, wrote}
			explained := []any{e.MustPull, e.Err, explainCalls, e.WouldRecord != nil}
			if diff := cmp.Diff(explained, check, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("check (mustPull, err, credential calls, wrote) differs from the explanation (-explain +check):\n%s", diff)
			}
		})
	}
}

// checkSteps checks the steps are in increasing order, end with the step
// that answered, and that the answer has a rule.
func checkSteps(t *testing.T, e Explanation) {
	t.Helper()
	if len(e.Steps) == 0 {
		t.Fatal("no steps")
	}
	for i := 1; i < len(e.Steps); i++ {
		if e.Steps[i].Number < e.Steps[i-1].Number {
			t.Errorf("step %d listed after step %d", e.Steps[i].Number, e.Steps[i-1].Number)
		}
	}
	if last := e.Steps[len(e.Steps)-1].Number; last != int(e.DecidedAt) {
		t.Errorf("last step listed is %d, the answer came from step %d", last, e.DecidedAt)
	}
	if e.Rule == "" {
		t.Error("no rule")
	}
	for _, s := range e.Steps {
		if s.Check == "" || s.Finding == "" {
			t.Errorf("empty step %+v", s)
		}
	}
}

// TestExplainImagePullFindings checks the words of some steps an operator
// relies on.
func TestExplainImagePullFindings(t *testing.T) {
	s1 := secret("uid1", "ns1", "pull1", hashOK)
	entry := map[string]accessor.ImagePullCredentials{keyX: {KubernetesSecrets: []accessor.ImagePullSecret{s1}}}
	for _, tc := range []struct {
		name      string
		policy    VerificationPolicy
		record    *accessor.ImagePulledRecord
		intent    string
		inFlight  string
		image     string
		pod       []accessor.ImagePullSecret
		wantRule  string
		wantLines []string // "step: finding" substrings, in order
		wantWould *SecretRef
	}{
		{name: "stored intent", policy: NeverVerifyPreloadedImages, intent: imgX, image: imgX,
			wantRule:  "no pulled record",
			wantLines: []string{`3: none, but a pull intent for "` + imgX + `" is on record`, "5: NeverVerifyPreloadedImages requires verification", "6: no:"}},
		{name: "in flight", policy: NeverVerifyPreloadedImages, inFlight: imgX, image: imgX,
			wantRule:  "no pulled record",
			wantLines: []string{`3: none, but a pull of "` + imgX + `" is in flight in this process`}},
		{name: "preloaded", policy: NeverVerifyPreloadedImages, image: imgX,
			wantRule:  "policy NeverVerifyPreloadedImages exempts the image",
			wantLines: []string{"3: none, and no pull intent", "5: NeverVerifyPreloadedImages does not require verification here"}},
		{name: "record found", policy: AlwaysVerify, record: rec(refA, t0, entry), image: imgX, pod: []accessor.ImagePullSecret{s1},
			wantRule: "matching secret and credential hash",
			wantLines: []string{"1: yes, as " + refA, "3: found (last updated 2026-01-02T03:04:05Z): pulled by the kubelet",
				"7: " + keyX, "8: 1 secret(s), 0 service account(s), node-wide false", "11: 1 secret(s), service account none",
				"12: secret ns1/pull1 (uid uid1) holds a recorded credential hash"}},
		{name: "same hash, other coordinates", policy: AlwaysVerify, record: rec(refA, t0, entry), image: imgX,
			pod:       []accessor.ImagePullSecret{secret("uid2", "ns2", "copy", hashOK)},
			wantRule:  "same credential under other secret coordinates",
			wantLines: []string{"12: secret ns2/copy (uid uid2) holds the same credential as recorded secret ns1/pull1 (uid uid1)"},
			wantWould: &SecretRef{UID: "uid2", Namespace: "ns2", Name: "copy"}},
		{name: "rotated", policy: AlwaysVerify, record: rec(refA, t0, entry), image: imgX,
			pod:       []accessor.ImagePullSecret{secret("uid1", "ns1", "pull1", "new-hash")},
			wantRule:  "same secret coordinates, rotated credential",
			wantLines: []string{"12: secret ns1/pull1 (uid uid1) matches recorded coordinates with a new credential hash"},
			wantWould: &SecretRef{UID: "uid1", Namespace: "ns1", Name: "pull1"}},
		{name: "other name", policy: AlwaysVerify, record: rec(refA, t0, entry), image: imgY,
			wantRule:  "no credentials recorded for this name",
			wantLines: []string{"8: none: the content was pulled only under other names (1)"}},
		{name: "tracked", policy: AlwaysVerify, record: rec(refA, t0, nil), image: imgX,
			wantRule:  "no credentials recorded for this name",
			wantLines: []string{"8: none: the record is tracked without credentials, re-verify"}},
		{name: "no match", policy: AlwaysVerify, record: rec(refA, t0, entry), image: imgX,
			wantRule: "no matching credentials",
			wantLines: []string{"12: the pod has no pull secrets", "13: the pod uses no service account credentials",
				"14: no recorded credential matches the pod's"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, logger := testCtx(t)
			store := newFaultyStore()
			if tc.record != nil {
				putRecords(t, store, tc.record)
			}
			if tc.intent != "" {
				putIntents(t, store, tc.intent)
			}
			m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, tc.policy))
			if tc.inFlight != "" {
				if err := m.RecordPullIntent(logger, tc.inFlight); err != nil {
					t.Fatal(err)
				}
			}
			calls := 0
			e := m.ExplainImagePull(ctx, tc.image, refA, podCreds(&calls, tc.pod, nil, nil))
			var lines []string
			for _, s := range e.Steps {
				lines = append(lines, fmt.Sprintf("%d: %s", s.Number, s.Finding))
			}
			all := strings.Join(lines, "\n")
			rest := all
			for _, want := range tc.wantLines {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Errorf("no line %q (in order) in:\n%s", want, all)
					continue
				}
				rest = rest[i+len(want):]
			}
			if e.Rule != tc.wantRule {
				t.Errorf("rule %q, want %q", e.Rule, tc.wantRule)
			}
			if diff := cmp.Diff(tc.wantWould, e.WouldRecord); diff != "" {
				t.Errorf("WouldRecord (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExplainImagePullNotPresent: no steps beyond the first, no result
// label (no check is counted for an absent image).
func TestExplainImagePullNotPresent(t *testing.T) {
	ctx, _ := testCtx(t)
	m, _ := newTestManager(t, newFaultyStore().Accessor(), mustPolicy(t, NeverVerify))
	e := m.ExplainImagePull(ctx, imgX, "", nil)
	want := Explanation{Image: imgX, Policy: "NeverVerify", MustPull: true, DecidedAt: StepImageNotPresent, Rule: "image not present",
		Steps: []ExplainStep{{Number: 1, Check: "image present on the node", Finding: "no: there is nothing to reuse"}}}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestExplainImagePullNeverShowsHashes explains every secret path with
// distinctive hashes and checks none appears anywhere in the explanation.
func TestExplainImagePullNeverShowsHashes(t *testing.T) {
	const (
		recorded = "5ecre7000000000000000000000000000000000000000000000000000000aaaa"
		podHash  = "5ecre7000000000000000000000000000000000000000000000000000000bbbb"
	)
	many := make([]accessor.ImagePullSecret, 100)
	for i := range many {
		many[i] = secret(fmt.Sprintf("u%03d", i), "ns", fmt.Sprintf("s%03d", i), recorded)
	}
	for name, pod := range map[string][]accessor.ImagePullSecret{
		"same hash":                 {secret("u000", "ns", "s000", recorded)},
		"same hash, other secret":   {secret("x", "ns", "x", recorded)},
		"rotated":                   {secret("u001", "ns", "s001", podHash)},
		"no match":                  {secret("x", "ns", "x", podHash)},
		"coordinates at the limit":  {secret("u050", "ns", "s050", podHash)},
		"several, the last matches": {secret("x", "ns", "x", podHash), secret("u002", "ns", "s002", recorded)},
	} {
		for _, secrets := range [][]accessor.ImagePullSecret{many[:2], many} {
			t.Run(fmt.Sprintf("%s/%d cached", name, len(secrets)), func(t *testing.T) {
				ctx, _ := testCtx(t)
				store := newFaultyStore()
				putRecords(t, store, rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {KubernetesSecrets: secrets}}))
				m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify))
				calls := 0
				e := m.ExplainImagePull(ctx, imgX, refA, podCreds(&calls, pod, nil, nil))
				text := fmt.Sprintf("%+v %#v", e, e)
				if e.WouldRecord != nil {
					text += fmt.Sprintf("%+v", *e.WouldRecord)
				}
				for _, h := range []string{recorded, podHash, recorded[:12], podHash[len(podHash)-12:]} {
					if strings.Contains(text, h) {
						t.Errorf("explanation shows a credential hash: %s", text)
					}
				}
				if calls != 1 || len(e.Steps) < 8 {
					t.Errorf("the explanation did not reach the secrets (calls %d, steps %d)", calls, len(e.Steps))
				}
			})
		}
	}
}

// TestExplainImagePullErrors: the error that forced the fail-safe answer is
// visible, and only a credentials error is returned as Err.
func TestExplainImagePullErrors(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFaultyStore()
	putRecords(t, store, rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {KubernetesSecrets: []accessor.ImagePullSecret{secret("u", "n", "s", "h")}}}))
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify))

	e := m.ExplainImagePull(ctx, "UPPER/Case:bad", refA, nil)
	if !errors.Is(e.FailSafeErr, ErrInvalidImageName) || e.Err != nil || e.DecidedAt != StepNameParse || !e.MustPull {
		t.Errorf("bad name: step %d, mustPull %t, Err %v, FailSafeErr %v", e.DecidedAt, e.MustPull, e.Err, e.FailSafeErr)
	}

	calls := 0
	e = m.ExplainImagePull(ctx, imgX, refA, podCreds(&calls, nil, nil, errInjected))
	if !errors.Is(e.Err, errInjected) || e.FailSafeErr != nil || e.DecidedAt != StepPodCredentials || e.Result != ResultError {
		t.Errorf("credentials error: step %d, result %s, Err %v, FailSafeErr %v", e.DecidedAt, e.Result, e.Err, e.FailSafeErr)
	}

	setFail(store, "GetImagePulledRecord", errInjected)
	e = m.ExplainImagePull(ctx, imgX, refA, nil)
	if !errors.Is(e.FailSafeErr, errInjected) || e.Err != nil || e.DecidedAt != StepRecordsError || e.Rule != "record unreadable: fail safe" {
		t.Errorf("record error: step %d, rule %q, Err %v, FailSafeErr %v", e.DecidedAt, e.Rule, e.Err, e.FailSafeErr)
	}
	if got := e.Steps[1]; got.Number != 3 || !strings.Contains(got.Finding, errInjected.Error()) {
		t.Errorf("step 3 = %+v, want the error", got)
	}
	setFail(store, "GetImagePulledRecord", nil)
	setFail(store, "ImagePullIntentExists", errInjected)
	e = m.ExplainImagePull(ctx, imgX, "sha256:none", nil)
	if !errors.Is(e.FailSafeErr, errInjected) || e.DecidedAt != StepRecordsError || e.Rule != "intent unreadable: fail safe" {
		t.Errorf("intent error: step %d, rule %q, FailSafeErr %v", e.DecidedAt, e.Rule, e.FailSafeErr)
	}
}

// TestExplainImagePullUnnamedPolicy: a policy without a String method is
// "the policy".
func TestExplainImagePullUnnamedPolicy(t *testing.T) {
	ctx, _ := testCtx(t)
	m, _ := newTestManager(t, newFaultyStore().Accessor(), policyFunc(func(string, bool) bool { return false }))
	e := m.ExplainImagePull(ctx, imgX, refA, nil)
	if e.Rule != "the policy exempts the image" || e.Steps[len(e.Steps)-1].Finding != "the policy does not require verification here" {
		t.Errorf("rule %q, steps %+v", e.Rule, e.Steps)
	}
}

func TestPolicyNames(t *testing.T) {
	for _, p := range []VerificationPolicy{NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages, AlwaysVerify} {
		var allowlist []string
		if p == NeverVerifyAllowlistedImages {
			allowlist = []string{"registry.example/*"}
		}
		if got := policyName(mustPolicy(t, p, allowlist...)); got != string(p) {
			t.Errorf("policy %s is named %q", p, got)
		}
	}
}

// TestNewManagerWithoutImagesWritesNothing: a manager built with a nil
// ImageLister over a store with leftover intents (what an explaining tool
// does) makes no write and no delete.
func TestNewManagerWithoutImagesWritesNothing(t *testing.T) {
	store := newFaultyStore()
	putIntents(t, store, imgX)
	putIntents(t, store, "busybox")
	putRecords(t, store, rec(refA, t0, nil))
	newTestManager(t, store.Accessor(), mustPolicy(t, NeverVerifyPreloadedImages))
	if diff := cmp.Diff(map[string]int{}, writeCalls(store)); diff != "" {
		t.Errorf("NewImagePullManager wrote:\n%s", diff)
	}
	if store.CallCount("ListImagePullIntents") != 1 {
		t.Errorf("intents listed %d times", store.CallCount("ListImagePullIntents"))
	}
}

// TestExplainOverReadOnlyFSStore explains over a read-only fsstore holding
// an intent and records: the answer is the expected one and no file changes.
func TestExplainOverReadOnlyFSStore(t *testing.T) {
	ctx, _ := testCtx(t)
	dir := t.TempDir()
	logger := klog.Background()
	rw, err := fsstore.New(logger, dir, fsstore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	s1 := secret("uid1", "ns1", "pull1", hashOK)
	if err := rw.WriteImagePulledRecord(logger, rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {KubernetesSecrets: []accessor.ImagePullSecret{s1}}})); err != nil {
		t.Fatal(err)
	}
	if err := rw.WriteImagePullIntent(logger, imgY); err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)

	ro, err := fsstore.New(logger, dir, fsstore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	m, err := NewImagePullManager(ctx, ro, mustPolicy(t, NeverVerifyPreloadedImages), nil, WithPreloadedImageProtection(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		image string
		pod   accessor.ImagePullSecret
		want  bool
		step  Step
		would bool
	}{
		{image: imgX, pod: s1, want: false, step: StepSecretMatch},
		{image: imgX, pod: secret("uid9", "ns9", "copy", hashOK), want: false, step: StepSecretMatch, would: true},
		{image: imgX, pod: secret("uid9", "ns9", "other", "other"), want: true, step: StepNoMatch},
		{image: imgY, want: true, step: StepNoMappingEntry}, // the intent makes it pulled by the kubelet
		{image: "registry.example/preloaded:v1", want: false, step: StepPolicy},
	} {
		calls := 0
		e := m.ExplainImagePull(ctx, tc.image, refA, podCreds(&calls, []accessor.ImagePullSecret{tc.pod}, nil, nil))
		if e.MustPull != tc.want || e.DecidedAt != tc.step || (e.WouldRecord != nil) != tc.would || e.FailSafeErr != nil {
			t.Errorf("%s with %s: mustPull %t step %d wouldRecord %v err %v; want %t %d %t",
				tc.image, tc.pod.Name, e.MustPull, e.DecidedAt, e.WouldRecord, e.FailSafeErr, tc.want, tc.step, tc.would)
		}
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("files changed (-before +after):\n%s", diff)
	}
}

// snapshot maps every file under dir to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		out[strings.TrimPrefix(path, dir)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkExplainImagePull measures an explanation of a secret match among
// 50 cached secrets (for comparison with
// BenchmarkMustAttemptImagePullSecretMatch; explanations are not on the hot
// path).
func BenchmarkExplainImagePull(b *testing.B) {
	ctx := klog.NewContext(context.Background(), klog.Background())
	store := memstore.New()
	var secrets []accessor.ImagePullSecret
	for i := range 50 {
		secrets = append(secrets, secret(fmt.Sprintf("uid-%02d", i), "team", fmt.Sprintf("s%02d", i), fmt.Sprintf("hash-%02d", i)))
	}
	if err := store.WriteImagePulledRecord(klog.Background(), rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {KubernetesSecrets: secrets}})); err != nil {
		b.Fatal(err)
	}
	m, err := NewImagePullManager(ctx, store, mustPolicy(b, AlwaysVerify), nil)
	if err != nil {
		b.Fatal(err)
	}
	pod := []accessor.ImagePullSecret{secrets[49]}
	get := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) { return pod, nil, nil }
	b.ReportAllocs()
	for b.Loop() {
		if e := m.ExplainImagePull(ctx, imgX, refA, get); e.MustPull || e.DecidedAt != StepSecretMatch {
			b.Fatalf("wrong answer: %+v", e)
		}
	}
}

// TestExplainImagePullRereadsRecord: as TestLockFreeCheckNeverMissesRecordAndIntent,
// a pull is recorded between the record read and the intent read; the
// explanation follows the same path as the check and says so.
func TestExplainImagePullRereadsRecord(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFaultyStore()
	putIntents(t, store, imgX)
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, NeverVerifyPreloadedImages))
	onFirstCall(store, "ImagePullIntentExists", func() {
		m.RecordImagePulled(ctx, imgX, refA, &accessor.ImagePullCredentials{
			KubernetesSecrets: []accessor.ImagePullSecret{secret("u", "team", "s", "h")}})
	})
	calls := 0
	e := m.ExplainImagePull(ctx, imgX, refA, podCreds(&calls, nil, nil, nil))
	if !e.MustPull || !e.PulledByKubelet || e.DecidedAt != StepNoMatch || calls != 1 {
		t.Errorf("mustPull %t pulledByKubelet %t step %d calls %d; want true true %d 1", e.MustPull, e.PulledByKubelet, e.DecidedAt, calls, StepNoMatch)
	}
	if f := e.Steps[1].Finding; !strings.HasPrefix(f, "read again as a pull finished meanwhile: found") {
		t.Errorf("step 3 finding %q", f)
	}
}

package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

const (
	nameA = "registry.example.com/team-a/api"
	imgA  = nameA + ":1.4"
	nameC = "registry.example.com/team-c/tools"
	imgC  = nameC + ":2.0"
)

var (
	t0    = metav1.NewTime(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	secA  = accessor.ImagePullSecret{UID: "uid-a", Namespace: "team-a", Name: "regcred", CredentialHash: "h1"}
	secB  = accessor.ImagePullSecret{UID: "uid-b", Namespace: "team-b", Name: "regcred", CredentialHash: "hb"}
	saC   = accessor.ImagePullServiceAccount{UID: "uid-c", Namespace: "team-c", Name: "builder"}
	noPod = Pod{}
)

func rec(ref string, mapping map[string]accessor.ImagePullCredentials) *accessor.ImagePulledRecord {
	return &accessor.ImagePulledRecord{LastUpdatedTime: t0, ImageRef: ref, CredentialMapping: mapping}
}

func secrets(s ...accessor.ImagePullSecret) accessor.ImagePullCredentials {
	return accessor.ImagePullCredentials{KubernetesSecrets: s}
}

// manySecrets returns n secrets with distinct coordinates and hashes.
func manySecrets(n int) accessor.ImagePullCredentials {
	var c accessor.ImagePullCredentials
	for i := range n {
		c.KubernetesSecrets = append(c.KubernetesSecrets, accessor.ImagePullSecret{
			UID: fmt.Sprintf("uid-%03d", i), Namespace: "team-a", Name: fmt.Sprintf("s%03d", i), CredentialHash: fmt.Sprintf("h%03d", i)})
	}
	return c
}

// fixture returns a fresh store with one record per situation.
func fixture(t *testing.T) *memstore.Store {
	t.Helper()
	s := memstore.New()
	logger := klog.Background()
	for _, r := range []*accessor.ImagePulledRecord{
		rec("ref-secret", map[string]accessor.ImagePullCredentials{nameA: secrets(secA)}),
		rec("ref-sa", map[string]accessor.ImagePullCredentials{nameC: {KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{saC}}}),
		rec("ref-node", map[string]accessor.ImagePullCredentials{"nginx": {NodePodsAccessible: true}}),
		rec("ref-tracked", nil),
		rec("ref-empty-entry", map[string]accessor.ImagePullCredentials{nameA: {}}),
		rec("ref-empty-hash", map[string]accessor.ImagePullCredentials{nameA: secrets(accessor.ImagePullSecret{UID: "uid-e", Namespace: "team-a", Name: "old"})}),
		rec("ref-100", map[string]accessor.ImagePullCredentials{nameA: manySecrets(100)}),
		rec("ref-99", map[string]accessor.ImagePullCredentials{nameA: manySecrets(99)}),
	} {
		if err := s.WriteImagePulledRecord(logger, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteImagePullIntent(logger, "registry.example.com/team-d/job:1"); err != nil {
		t.Fatal(err)
	}
	return s
}

type testCase struct {
	name      string
	policy    pullmanager.VerificationPolicy
	allowlist []string
	protect   bool
	image     string
	imageRef  string
	pod       Pod
	wantPull  bool
	wantStep  pullmanager.Step
	wantRes   string
	wantCreds bool
	wantWrite bool
}

func cases() []testCase {
	rotated := secA
	rotated.CredentialHash = "h2"
	mirror := accessor.ImagePullSecret{UID: "uid-m", Namespace: "team-a", Name: "mirror", CredentialHash: "h1"}
	return []testCase{
		{name: "not present", image: imgA, wantPull: true, wantStep: 1, wantRes: ResultNotPresent},
		{name: "preloaded, default policy", image: "registry.k8s.io/pause:3.10", imageRef: "ref-none", wantStep: 5, wantRes: ResultPolicyAllowed},
		{name: "preloaded, AlwaysVerify", policy: pullmanager.AlwaysVerify, image: "registry.k8s.io/pause:3.10", imageRef: "ref-none", wantPull: true, wantStep: 6, wantRes: ResultMustAuthenticate},
		{name: "intent only, default policy", image: "registry.example.com/team-d/job:1", imageRef: "ref-none", wantPull: true, wantStep: 6, wantRes: ResultMustAuthenticate},
		{name: "intent only, NeverVerify", policy: pullmanager.NeverVerify, image: "registry.example.com/team-d/job:1", imageRef: "ref-none", wantStep: 5, wantRes: ResultPolicyAllowed},
		{name: "allowlisted ignores records", policy: pullmanager.NeverVerifyAllowlistedImages, allowlist: []string{"registry.example.com/team-a/*"},
			image: imgA, imageRef: "ref-secret", pod: Pod{Secrets: []accessor.ImagePullSecret{secB}}, wantStep: 5, wantRes: ResultPolicyAllowed},
		{name: "not allowlisted preloaded", policy: pullmanager.NeverVerifyAllowlistedImages, allowlist: []string{"registry.example.com/team-a/*"},
			image: "registry.k8s.io/pause:3.10", imageRef: "ref-none", wantPull: true, wantStep: 6, wantRes: ResultMustAuthenticate},
		{name: "unparsable name", image: "Invalid::Name", imageRef: "ref-secret", wantPull: true, wantStep: 7, wantRes: ResultError},
		{name: "tracked without credentials", image: imgA, imageRef: "ref-tracked", pod: Pod{Secrets: []accessor.ImagePullSecret{secA}}, wantPull: true, wantStep: 8, wantRes: ResultMustAuthenticate},
		{name: "other name only", image: "registry.example.com/team-b/api:1.4", imageRef: "ref-secret", wantPull: true, wantStep: 8, wantRes: ResultMustAuthenticate},
		{name: "other name only, protected preloaded", protect: true, image: "registry.example.com/team-b/api:1.4", imageRef: "ref-secret", wantStep: 5, wantRes: ResultPolicyAllowed},
		{name: "own name, protected preloaded", protect: true, image: imgA, imageRef: "ref-secret", pod: Pod{Secrets: []accessor.ImagePullSecret{secA}},
			wantStep: 12, wantRes: ResultRecordFound, wantCreds: true},
		{name: "node-wide", image: "nginx", imageRef: "ref-node", wantStep: 9, wantRes: ResultRecordFound},
		{name: "empty entry", image: imgA, imageRef: "ref-empty-entry", wantPull: true, wantStep: 10, wantRes: ResultMustAuthenticate},
		{name: "secret and hash match", image: imgA, imageRef: "ref-secret", pod: Pod{Secrets: []accessor.ImagePullSecret{secA}},
			wantStep: 12, wantRes: ResultRecordFound, wantCreds: true},
		{name: "same hash other coordinates", image: imgA, imageRef: "ref-secret", pod: Pod{Secrets: []accessor.ImagePullSecret{mirror}},
			wantStep: 12, wantRes: ResultRecordFound, wantCreds: true, wantWrite: true},
		{name: "rotated hash same coordinates", image: imgA, imageRef: "ref-secret", pod: Pod{Secrets: []accessor.ImagePullSecret{rotated}},
			wantStep: 12, wantRes: ResultRecordFound, wantCreds: true, wantWrite: true},
		{name: "other tenant", image: imgA, imageRef: "ref-secret", pod: Pod{Secrets: []accessor.ImagePullSecret{secB}},
			wantPull: true, wantStep: 14, wantRes: ResultMustAuthenticate, wantCreds: true},
		{name: "no pod credentials", image: imgA, imageRef: "ref-secret", pod: noPod,
			wantPull: true, wantStep: 14, wantRes: ResultMustAuthenticate, wantCreds: true},
		{name: "empty hashes same coordinates", image: imgA, imageRef: "ref-empty-hash",
			pod:      Pod{Secrets: []accessor.ImagePullSecret{{UID: "uid-e", Namespace: "team-a", Name: "old"}}},
			wantStep: 12, wantRes: ResultRecordFound, wantCreds: true},
		{name: "empty hashes other coordinates", image: imgA, imageRef: "ref-empty-hash",
			pod:      Pod{Secrets: []accessor.ImagePullSecret{{UID: "uid-x", Namespace: "team-a", Name: "other"}}},
			wantPull: true, wantStep: 14, wantRes: ResultMustAuthenticate, wantCreds: true},
		{name: "rotation refused at 100 secrets", image: imgA, imageRef: "ref-100",
			pod:      Pod{Secrets: []accessor.ImagePullSecret{{UID: "uid-000", Namespace: "team-a", Name: "s000", CredentialHash: "new"}}},
			wantPull: true, wantStep: 14, wantRes: ResultMustAuthenticate, wantCreds: true},
		{name: "rotation accepted at 99 secrets", image: imgA, imageRef: "ref-99",
			pod:      Pod{Secrets: []accessor.ImagePullSecret{{UID: "uid-000", Namespace: "team-a", Name: "s000", CredentialHash: "new"}}},
			wantStep: 12, wantRes: ResultRecordFound, wantCreds: true, wantWrite: true},
		{name: "hash match at 100 secrets, not recorded", image: imgA, imageRef: "ref-100",
			pod:      Pod{Secrets: []accessor.ImagePullSecret{{UID: "uid-new", Namespace: "team-a", Name: "new", CredentialHash: "h042"}}},
			wantStep: 12, wantRes: ResultRecordFound, wantCreds: true},
		{name: "service account match", image: imgC, imageRef: "ref-sa", pod: Pod{ServiceAccount: &saC},
			wantStep: 13, wantRes: ResultRecordFound, wantCreds: true},
		{name: "service account with another uid", image: imgC, imageRef: "ref-sa",
			pod:      Pod{ServiceAccount: &accessor.ImagePullServiceAccount{UID: "uid-new", Namespace: "team-c", Name: "builder"}},
			wantPull: true, wantStep: 14, wantRes: ResultMustAuthenticate, wantCreds: true},
	}
}

// TestExplain runs every case through the adapter over a memstore and
// checks the answer, the deciding step, the result label, the credential
// lookup and the would-record flag, and that nothing was written.
func TestExplain(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			store := fixture(t)
			before := contents(t, store)
			e := explainCase(t, store, tc)
			got := []any{e.MustPull, e.DecidedAt, e.Result, e.CredentialsLookedUp, e.WouldRecord != nil}
			want := []any{tc.wantPull, tc.wantStep, tc.wantRes, tc.wantCreds, tc.wantWrite}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("explanation (mustPull, step, result, credentials, write) -want +got:\n%s\nsteps: %+v", diff, e.Steps)
			}
			if diff := cmp.Diff(before, contents(t, store)); diff != "" {
				t.Errorf("Explain wrote to the store:\n%s", diff)
			}
			if e.Policy != policyOf(tc) || e.Image != tc.image || e.ImageRef != tc.imageRef {
				t.Errorf("header: policy %q image %q imageRef %q", e.Policy, e.Image, e.ImageRef)
			}
		})
	}
}

func policyOf(tc testCase) string {
	if tc.policy == "" {
		return string(pullmanager.NeverVerifyPreloadedImages)
	}
	return string(tc.policy)
}

func explainCase(t *testing.T, store accessor.PullRecordsAccessor, tc testCase) Explanation {
	t.Helper()
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.VerificationPolicy(policyOf(tc)), tc.allowlist)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Explain(context.Background(), store, Options{Policy: policy, PolicyName: policyOf(tc), ProtectPreloaded: tc.protect},
		tc.image, tc.imageRef, tc.pod)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// contents returns every intent and record in store.
func contents(t *testing.T, store accessor.PullRecordsAccessor) []any {
	t.Helper()
	intents, err := store.ListImagePullIntents()
	if err != nil {
		t.Fatal(err)
	}
	records, err := store.ListImagePulledRecords()
	if err != nil {
		t.Fatal(err)
	}
	return []any{intents, records}
}

// TestExplainStepsAreOrdered checks the steps are listed in increasing
// order and end with the deciding step.
func TestExplainStepsAreOrdered(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			e := explainCase(t, fixture(t), tc)
			if len(e.Steps) == 0 {
				t.Fatal("no steps")
			}
			for i := 1; i < len(e.Steps); i++ {
				if e.Steps[i].Number < e.Steps[i-1].Number {
					t.Errorf("step %d listed after step %d", e.Steps[i].Number, e.Steps[i-1].Number)
				}
			}
			if last := e.Steps[len(e.Steps)-1].Number; last != int(e.DecidedAt) {
				t.Errorf("last step %d, decided at %d", last, e.DecidedAt)
			}
		})
	}
}

var errDisk = errors.New("disk on fire")

func TestExplainFailsSafe(t *testing.T) {
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerify, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Every record read, or every intent read, fails. The manager is given
	// the FaultyAccessor itself, without the memstore's RecordPeeker, so it
	// cannot peek past the fault.
	for name, fail := range map[string]struct {
		method string
		err    error
	}{
		"record": {"GetImagePulledRecord", &accessor.CorruptRecordError{Path: "x", Err: errDisk}},
		"intent": {"ImagePullIntentExists", errDisk},
	} {
		t.Run(name, func(t *testing.T) {
			store := accessortest.Faulty(memstore.New())
			store.Fail(fail.method, fail.err)
			e, err := Explain(context.Background(), store, Options{Policy: policy}, imgA, "ref", Pod{})
			if err != nil {
				t.Fatal(err)
			}
			got := []any{e.MustPull, e.DecidedAt, e.Result, strings.Contains(e.Error, errDisk.Error())}
			if diff := cmp.Diff([]any{true, pullmanager.StepRecordsError, ResultError, true}, got); diff != "" {
				t.Errorf("(mustPull, step, result, error shown) -want +got:\n%s", diff)
			}
		})
	}
}

func TestExplainNeedsPolicy(t *testing.T) {
	_, err := Explain(context.Background(), memstore.New(), Options{}, imgA, "ref", Pod{})
	if !errors.Is(err, pullmanager.ErrMissingDependency) {
		t.Errorf("error = %v, want ErrMissingDependency", err)
	}
}

// TestExplainIsTheManagers checks that Explain shows the manager's own
// explanation, changed only where documented: the result label of an absent
// image and the policy's name. (Pod secrets without a hash are covered by
// TestUnknownHash; every pod here gives its hashes.)
func TestExplainIsTheManagers(t *testing.T) {
	for _, tc := range cases() {
		if slices.ContainsFunc(tc.pod.Secrets, func(s accessor.ImagePullSecret) bool { return s.CredentialHash == "" }) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			got := explainCase(t, fixture(t), tc)
			policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.VerificationPolicy(policyOf(tc)), tc.allowlist)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			m, err := pullmanager.NewImagePullManager(ctx, fixture(t), policy, nil, pullmanager.WithPreloadedImageProtection(tc.protect))
			if err != nil {
				t.Fatal(err)
			}
			want := m.ExplainImagePull(ctx, tc.image, tc.imageRef, tc.pod.credentials())
			if want.DecidedAt == pullmanager.StepImageNotPresent {
				want.Result = ResultNotPresent
			}
			// Errors are made anew by each decision: compare their text.
			sameText := cmp.Comparer(func(a, b error) bool { return fmt.Sprint(a) == fmt.Sprint(b) })
			if diff := cmp.Diff(Explanation{Explanation: want}, got, sameText); diff != "" {
				t.Errorf("Explain differs from the manager's explanation (-manager +Explain):\n%s", diff)
			}
		})
	}
}

// TestJSONShape pins the JSON field names and order the command prints.
func TestJSONShape(t *testing.T) {
	e := Explanation{
		Explanation: pullmanager.Explanation{Image: "i", ImageRef: "r", Policy: "P", Result: ResultRecordFound, DecidedAt: 12, Rule: "x",
			WouldRecord: &SecretRef{UID: "u", Namespace: "n", Name: "s"}, Steps: []pullmanager.ExplainStep{{Number: 12, Check: "c", Finding: "f"}},
			Error: "e", Err: errDisk, FailSafeErr: errDisk},
		UnknownHashes:        []SecretRef{{UID: "u2", Namespace: "n2", Name: "s2"}},
		HashUnknownMayMatter: true,
	}
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"image":"i","imageRef":"r","policy":"P","mustPull":false,"result":"credentialRecordFound","decidedAt":12,` +
		`"rule":"x","pulledByKubelet":false,"credentialsLookedUp":false,"wouldRecord":{"uid":"u","namespace":"n","name":"s"},` +
		`"steps":[{"step":12,"check":"c","finding":"f"}],"error":"e",` +
		`"unknownHashes":[{"uid":"u2","namespace":"n2","name":"s2"}],"hashUnknownMayMatter":true}`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
	// An absent image: one step, an empty list of steps never prints as
	// null, and the optional fields are left out.
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerify, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, err = Explain(context.Background(), fixture(t), Options{Policy: policy}, imgA, "", noPod); err != nil {
		t.Fatal(err)
	}
	if data, err = json.Marshal(e); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"result":"imageNotPresent"`, `"decidedAt":1,`, `"steps":[{"step":1,`} {
		if !strings.Contains(string(data), s) {
			t.Errorf("absent image: no %s in %s", s, data)
		}
	}
	for _, s := range []string{"wouldRecord", "error", "unknownHashes", "hashUnknownMayMatter", "null"} {
		if strings.Contains(string(data), s) {
			t.Errorf("absent image: %s in %s", s, data)
		}
	}
}

func TestRedactHash(t *testing.T) {
	for in, want := range map[string]string{"": "", "abc": "…", "0123456789abcdef": "01234567…"} {
		if got := RedactHash(in); got != want {
			t.Errorf("RedactHash(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    accessor.ImagePullSecret
		wantErr bool
	}{
		{in: "ns/name/uid", want: accessor.ImagePullSecret{Namespace: "ns", Name: "name", UID: "uid"}},
		{in: "ns/name/uid:" + fullHash, want: accessor.ImagePullSecret{Namespace: "ns", Name: "name", UID: "uid", CredentialHash: fullHash}},
		{in: "ns/name/uid:" + strings.ToUpper(fullHash), want: accessor.ImagePullSecret{Namespace: "ns", Name: "name", UID: "uid", CredentialHash: fullHash}},
		// A shortened hash (as tables show it), a hash with a non-hex
		// digit, an over-long one and an empty one are refused.
		{in: "ns/name/uid:abc", wantErr: true},
		{in: "ns/name/uid:" + fullHash[:8] + "…", wantErr: true},
		{in: "ns/name/uid:" + fullHash[:63] + "g", wantErr: true},
		{in: "ns/name/uid:" + fullHash + "0", wantErr: true},
		{in: "ns/name/uid:", wantErr: true},
		{in: "ns/name", wantErr: true},
		{in: "ns//uid", wantErr: true},
		{in: "a/b/c/d", wantErr: true},
		{in: "", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSecret(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrBadCredential) {
					t.Fatalf("ParseSecret(%q) error = %v, want ErrBadCredential", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
	sa, err := ParseServiceAccount("team-c/builder/uid-c")
	if err != nil || sa != saC {
		t.Errorf("ParseServiceAccount = %+v, %v; want %+v", sa, err, saC)
	}
	if _, err := ParseServiceAccount("team-c/builder"); !errors.Is(err, ErrBadCredential) {
		t.Errorf("ParseServiceAccount(two parts) error = %v, want ErrBadCredential", err)
	}
}

const fullHash = "9a3c0b6e1f2d4c5b8a7e6d5c4b3a29180f1e2d3c4b5a69788796a5b4c3d2e1f0"

// TestUnknownHash: a pod secret given without its hash is an unknown hash,
// not a rotated credential, and where nothing matched the explanation says
// the hash could matter. It runs the real manager, so a change of the
// manager's wording (managerRotatedRule) fails here.
func TestUnknownHash(t *testing.T) {
	noHash := secA
	noHash.CredentialHash = ""
	tc := testCase{image: imgA, imageRef: "ref-secret", pod: Pod{Secrets: []accessor.ImagePullSecret{noHash}}}
	e := explainCase(t, fixture(t), tc)
	if e.MustPull || e.DecidedAt != pullmanager.StepSecretMatch || e.Rule != RuleUnknownHash || e.WouldRecord != nil {
		t.Errorf("same coordinates, no hash: mustPull %t step %d rule %q wouldRecord %v", e.MustPull, e.DecidedAt, e.Rule, e.WouldRecord)
	}
	if last := e.Steps[len(e.Steps)-1].Finding; !strings.Contains(last, "unknown hash") || strings.Contains(last, "rotated") {
		t.Errorf("finding = %q", last)
	}
	if want := []SecretRef{{UID: "uid-a", Namespace: "team-a", Name: "regcred"}}; !cmp.Equal(e.UnknownHashes, want) {
		t.Errorf("UnknownHashes = %v, want %v", e.UnknownHashes, want)
	}

	// With the rotated hash given, the manager's own rule stands.
	rotated := secA
	rotated.CredentialHash = "h2"
	tc.pod = Pod{Secrets: []accessor.ImagePullSecret{rotated}}
	e = explainCase(t, fixture(t), tc)
	if e.Rule != managerRotatedRule || e.WouldRecord == nil || len(e.UnknownHashes) != 0 {
		t.Errorf("rotated hash: rule %q wouldRecord %v unknown %v", e.Rule, e.WouldRecord, e.UnknownHashes)
	}

	// Other coordinates and no hash: must pull, and the hash could matter.
	other := secB
	other.CredentialHash = ""
	tc.pod = Pod{Secrets: []accessor.ImagePullSecret{other}}
	e = explainCase(t, fixture(t), tc)
	if !e.MustPull || e.DecidedAt != pullmanager.StepNoMatch || !e.HashUnknownMayMatter {
		t.Errorf("other coordinates, no hash: mustPull %t step %d mayMatter %t", e.MustPull, e.DecidedAt, e.HashUnknownMayMatter)
	}
	// With its hash given, nothing is unknown.
	tc.pod = Pod{Secrets: []accessor.ImagePullSecret{secB}}
	if e = explainCase(t, fixture(t), tc); e.HashUnknownMayMatter || len(e.UnknownHashes) != 0 {
		t.Errorf("other coordinates with a hash: %+v", e)
	}
}

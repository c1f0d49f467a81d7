package demo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/pullmanager"
)

func runDemo(t testing.TB, noSync bool) ([]Event, Summary) {
	t.Helper()
	var events []Event
	sum, err := Run(context.Background(), Config{
		KubeletDir: t.TempDir(),
		Logger:     klog.Background(),
		NoSync:     noSync,
		OnEvent:    func(e Event) { events = append(events, e) },
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return events, sum
}

// TestRun plays the scenario (with fsync, as the command does) and checks
// the summary and the decisions that carry the story.
func TestRun(t *testing.T) {
	events, sum := runDemo(t, false)
	want := Summary{Policy: policyDefault, Decisions: 19, MayUse: 10, MustPull: 9, Pulls: 14, PullsDenied: 4, NeverPulled: 1, Prevented: 4, Records: 7, Intents: 0, Files: 7}
	if diff := cmp.Diff(want, sum, cmpopts.IgnoreFields(Summary{}, "Elapsed")); diff != "" {
		t.Errorf("summary -want +got:\n%s", diff)
	}
	type decision struct {
		Pod, Decision string
		Step          int
		Outcome       string
	}
	got := map[string]decision{}
	for _, e := range events {
		if e.Kind == KindStart {
			got[e.Pod] = decision{e.Pod, e.Decision, e.Step, e.Outcome}
		}
	}
	for _, w := range []decision{
		{"team-a/api-0", "not present", 0, "running"},
		{"team-a/api-1", "may use", 12, "running"},
		{"team-b/snoop", "must pull", 14, "ErrImagePull"},
		{"team-a/api-2", "may use", 12, "running"},   // rotation
		{"team-a/api-3", "may use", 12, "running"},   // same credential, other secret
		{"team-c/tools-1", "may use", 13, "running"}, // service account
		{"team-a/web", "must pull", 8, "running"},    // another spelling is another mapping key, as in the kubelet
		{"team-b/sidecar", "may use", 5, "running"},  // preloaded
		{"team-b/snoop-2", "must pull", 8, "ErrImagePull"},
		{"team-c/batch-1", "must pull", 8, "running"}, // recovered intent: re-verify
		{"team-a/web-2", "not present", 0, "running"}, // pruned and removed
		{"team-b/sidecar-2", "may use", 5, "running"}, // allowlisted
		{"team-b/shell", "must pull", 6, "running"},   // preloaded, not allowlisted
		{"team-b/pause", "must pull", 6, "running"},   // AlwaysVerify
		{"team-b/tool", "may use", 5, "running"},      // preloaded
		{"team-a/mirror", "not present", 0, "running"},
		{"team-b/tool-2", "may use", 5, "running"},             // protected: still preloaded
		{"team-b/tool-3", "must pull", 8, "ErrImageNeverPull"}, // upstream: poisoned
	} {
		if diff := cmp.Diff(w, got[w.Pod]); diff != "" {
			t.Errorf("pod %s -want +got:\n%s", w.Pod, diff)
		}
	}
}

// TestWithoutCheck checks that every pod the registry refused an image
// already on the node says which pod's private image it would have run
// without the check, and that no other start says anything of the kind.
func TestWithoutCheck(t *testing.T) {
	events, _ := runDemo(t, true)
	got := map[string]string{}
	for _, e := range events {
		if e.Kind != KindStart {
			continue
		}
		refused := e.Outcome == "ErrImagePull" && e.Decision == "must pull"
		if refused != (e.WithoutCheck != "") {
			t.Errorf("pod %s (%s, %s): withoutCheck %q", e.Pod, e.Decision, e.Outcome, e.WithoutCheck)
		}
		if e.WithoutCheck != "" {
			got[e.Pod] = e.WithoutCheck
		}
	}
	want := map[string]string{
		"team-b/snoop":   "team-b/snoop would run team-a's private image, pulled by team-a/api-0 with secret team-a/regcred",
		"team-b/bare":    "team-b/bare would run team-a's private image, pulled by team-a/api-0 with secret team-a/regcred",
		"team-a/tools":   "team-a/tools would run team-c's private image, pulled by team-c/tools-0 with service account team-c/builder",
		"team-b/snoop-2": "team-b/snoop-2 would run team-c's private image, pulled by team-c/batch-0 with service account team-c/builder",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("withoutCheck -want +got:\n%s", diff)
	}
}

// TestContrastShowsHarm checks that the kubernetes#138175 scene ends with
// different outcomes with and without the fix, and says which pod ran what.
func TestContrastShowsHarm(t *testing.T) {
	events, _ := runDemo(t, true)
	var notes []string
	for _, e := range events {
		if e.Kind == KindNote {
			notes = append(notes, e.Format())
		}
	}
	if len(notes) != 1 {
		t.Fatalf("got %d notes, want 1: %q", len(notes), notes)
	}
	for _, want := range []string{
		"team-a's pull of the same content as " + imgMirror,
		"with the fix:  team-b/tool-2 runs " + imgAlpine + " from the node -> running",
		"upstream:      team-b/tool-3 may not use it -> ErrImageNeverPull",
	} {
		if !strings.Contains(notes[0], want) {
			t.Errorf("note does not say %q:\n%s", want, notes[0])
		}
	}
}

// TestRunIsDeterministic plays twice and compares every event.
func TestRunIsDeterministic(t *testing.T) {
	first, _ := runDemo(t, true)
	second, _ := runDemo(t, true)
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("two runs differ -first +second:\n%s", diff)
	}
	if len(first) < 20 {
		t.Errorf("only %d events", len(first))
	}
}

// BenchmarkRun measures the demo as the command runs it (fsync on).
func BenchmarkRun(b *testing.B) {
	for b.Loop() {
		runDemo(b, false)
	}
}

// TestAgree checks the run-time comparison of the manager's explanation
// with its check: every difference is reported as ErrDisagree.
func TestAgree(t *testing.T) {
	pod := Pod{Name: "team-b/sidecar"}
	e := pullmanager.Explanation{Image: imgPause, MustPull: true, DecidedAt: pullmanager.StepNoMatch, Rule: "no matching credentials",
		CredentialsLookedUp: true}
	wouldRecord := e
	wouldRecord.MustPull, wouldRecord.WouldRecord = false, &pullmanager.SecretRef{UID: "u", Namespace: "n", Name: "s"}
	for _, tc := range []struct {
		name                string
		e                   pullmanager.Explanation
		must, called, wrote bool
		wantErr             bool
	}{
		{name: "agree", e: e, must: true, called: true},
		{name: "agree, with a write", e: wouldRecord, must: false, called: true, wrote: true},
		{name: "answer differs", e: e, must: false, called: true, wantErr: true},
		{name: "credential lookup differs", e: e, must: true, called: false, wantErr: true},
		{name: "check wrote, explanation says no", e: e, must: true, called: true, wrote: true, wantErr: true},
		{name: "explanation says it would write, check did not", e: wouldRecord, must: false, called: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := agree(pod, tc.e, tc.must, tc.called, tc.wrote)
			if tc.wantErr != errors.Is(err, ErrDisagree) || (!tc.wantErr && err != nil) {
				t.Errorf("agree = %v, want ErrDisagree: %t", err, tc.wantErr)
			}
		})
	}
}

// TestDecideExplains plays the first decisions of the scenario through the
// player and checks each event carries the explanation's step and rule.
func TestDecideExplains(t *testing.T) {
	var events []Event
	p := &player{
		ctx:        context.Background(),
		cfg:        Config{KubeletDir: t.TempDir(), Logger: klog.Background(), NoSync: true, OnEvent: func(e Event) { events = append(events, e) }},
		clock:      clocktesting.NewFakeClock(startTime),
		rt:         newFakeRuntime(),
		policyName: policyDefault,
	}
	p.setUp()
	if err := p.boot(); err != nil {
		t.Fatal(err)
	}
	defer p.shutdown()
	p.start(withSecrets("team-a/api-0", secretA), imgTeamA)
	p.start(withSecrets("team-a/api-3", secretAMirror), imgTeamA) // hash differs, coordinates differ: must pull
	p.start(withSecrets("team-a/api-2", secretARot), imgTeamA)    // rotation: written at check
	p.start(Pod{Name: "team-b/sidecar"}, imgPause)
	if p.err != nil {
		t.Fatal(p.err)
	}
	type decision struct {
		Decision, Result string
		Step             int
		Rule             string
	}
	var got []decision
	for _, e := range events {
		got = append(got, decision{e.Decision, e.Result, e.Step, e.Rule})
	}
	want := []decision{
		{"not present", "", 0, ""},
		{"must pull", pullmanager.ResultMustAuthenticate, int(pullmanager.StepNoMatch), "no matching credentials"},
		{"may use", pullmanager.ResultCredentialRecordFound, int(pullmanager.StepSecretMatch), "same secret coordinates, rotated credential"},
		{"may use", pullmanager.ResultCredentialPolicyAllowed, int(pullmanager.StepPolicy), "policy NeverVerifyPreloadedImages exempts the image"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions -want +got:\n%s", diff)
	}
}

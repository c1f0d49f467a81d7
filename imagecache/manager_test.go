package imagecache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fakeclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

type fixture struct {
	images *fakeImages
	pulls  *fakePulls
	sink   *sink
	clock  *fakeclock.FakeClock
}

func newFixture() *fixture {
	return &fixture{images: newFakeImages(), pulls: newFakePulls(), sink: newSink(), clock: fakeclock.NewFakeClock(t0)}
}

func (f *fixture) manager(t *testing.T, opts ...Option) *Manager {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	all := append([]Option{WithClock(f.clock), WithRetries(3, time.Millisecond, 5*time.Millisecond),
		WithNode("node-1", "containerd://1.6.20")}, f.sink.options()...)
	m, err := New(logger, f.images, f.pulls, append(all, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

var aliceSecret = &PullSecret{Namespace: "tenant-a", Name: "regcred", UID: "uid-a", Username: "alice", Password: "s3cret"}

// ignoreTimes drops the fields the clock fills in.
var ignoreTimes = cmpopts.IgnoreFields(ImageWorkResult{}, "Started", "Finished", "Duration", "Message")

func TestCredentialHashIsTheKubelets(t *testing.T) {
	// The kubelet hashes the JSON of its AuthConfig; from a docker config
	// only username, password and email are set, in that order.
	for _, tc := range []struct {
		secret PullSecret
		json   string
	}{
		{PullSecret{Username: "alice", Password: "s3cret"}, `{"username":"alice","password":"s3cret"}`},
		{PullSecret{Username: "u", Password: "p", Email: "u@example.com"}, `{"username":"u","password":"p","email":"u@example.com"}`},
		{PullSecret{}, `{}`},
	} {
		sum := sha256.Sum256([]byte(tc.json))
		if got, want := credentialHash(&tc.secret), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("credentialHash(%s) = %s, want %s", tc.json, got, want)
		}
	}
}

func TestApplyPullsAndRecordsCredentials(t *testing.T) {
	f := newFixture()
	f.images.private["reg/private:v1"] = "alice:s3cret"
	m := f.manager(t)
	run(t, m)
	ctx := context.Background()

	if err := m.Apply(ctx, ImageCache{Namespace: "tenant-a", Name: "cache", Images: []string{"reg/private:v1"}, PullSecret: aliceSecret}); err != nil {
		t.Fatal(err)
	}
	st := f.sink.wait(t)
	if err := m.Apply(ctx, ImageCache{Namespace: "ops", Name: "public", Images: []string{"reg/public:v1", "reg/public:v1"}}); err != nil {
		t.Fatal(err)
	}
	st2 := f.sink.wait(t)

	want := []ImageWorkResult{{
		Request: ImageWorkRequest{Image: "reg/private:v1", Node: "node-1", ContainerRuntimeVersion: "containerd://1.6.20",
			WorkType: WorkTypeCreate, ImageCache: CacheRef{"tenant-a", "cache"}},
		Status: StatusSucceeded, Reason: ReasonPulled, ImageRef: imageID("reg/private:v1"), Attempts: 1,
	}}
	if diff := cmp.Diff(want, st.Results, ignoreTimes); diff != "" {
		t.Errorf("private results (-want +got):\n%s", diff)
	}
	if !st.Complete || st.WorkType != WorkTypeCreate || st.Counts[StatusSucceeded] != 1 || st.Requests != 1 {
		t.Errorf("status = %+v", st)
	}
	if st2.Requests != 1 || st2.Counts[StatusSucceeded] != 1 {
		t.Errorf("duplicate images not collapsed: %+v", st2)
	}

	hash := credentialHash(aliceSecret)
	wantRec := []accessor.ImagePullCredentials{{KubernetesSecrets: []accessor.ImagePullSecret{{UID: "uid-a", Namespace: "tenant-a", Name: "regcred", CredentialHash: hash}}}}
	if diff := cmp.Diff(wantRec, f.pulls.recorded(imageID("reg/private:v1"))); diff != "" {
		t.Errorf("private record (-want +got):\n%s", diff)
	}
	wantAnon := []accessor.ImagePullCredentials{{NodePodsAccessible: true}}
	if diff := cmp.Diff(wantAnon, f.pulls.recorded(imageID("reg/public:v1"))); diff != "" {
		t.Errorf("anonymous record (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]pullCall{{"reg/private:v1", "alice"}, {"reg/public:v1", ""}}, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
	f.pulls.mu.Lock()
	calls := append([]string(nil), f.pulls.calls...)
	f.pulls.mu.Unlock()
	if diff := cmp.Diff([]string{"intent reg/private:v1", "pulled reg/private:v1", "intent reg/public:v1", "pulled reg/public:v1"}, calls); diff != "" {
		t.Errorf("pull manager calls (-want +got):\n%s", diff)
	}
}

func TestAlreadyPulledIsExact(t *testing.T) {
	tests := []struct {
		name       string
		preload    []string
		seed       *accessor.ImagePullCredentials
		secret     *PullSecret
		force      bool
		wantStatus ImageWorkStatus
		wantPulls  int
	}{
		{name: "absent", wantStatus: StatusSucceeded, wantPulls: 1},
		{name: "present, recorded node-wide", preload: []string{"reg/app:1.2"},
			seed: &accessor.ImagePullCredentials{NodePodsAccessible: true}, wantStatus: StatusAlreadyPulled},
		{name: "present, force full cache", preload: []string{"reg/app:1.2"},
			seed: &accessor.ImagePullCredentials{NodePodsAccessible: true}, force: true, wantStatus: StatusSucceeded, wantPulls: 1},
		{name: "only a longer tag present (no substring match)", preload: []string{"reg/app:1.21"},
			wantStatus: StatusSucceeded, wantPulls: 1},
		{name: "present, recorded for another secret", preload: []string{"reg/app:1.2"},
			seed:   &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{{Namespace: "b", Name: "x", UID: "u", CredentialHash: "h"}}},
			secret: aliceSecret, wantStatus: StatusSucceeded, wantPulls: 1},
		{name: "present, recorded for the same secret", preload: []string{"reg/app:1.2"},
			seed:   &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{{Namespace: "tenant-a", Name: "regcred", UID: "uid-a", CredentialHash: credentialHash(aliceSecret)}}},
			secret: aliceSecret, wantStatus: StatusAlreadyPulled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			f.images.preload(tc.preload...)
			if tc.seed != nil {
				f.pulls.seed(imageID("reg/app:1.2"), *tc.seed)
			}
			m := f.manager(t)
			run(t, m)
			if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/app:1.2"},
				ForceFullCache: tc.force, PullSecret: tc.secret}); err != nil {
				t.Fatal(err)
			}
			st := f.sink.wait(t)
			if got := st.Results[0].Status; got != tc.wantStatus {
				t.Errorf("status = %s (%s), want %s", got, st.Results[0].Message, tc.wantStatus)
			}
			if got := len(f.images.pullCalls()); got != tc.wantPulls {
				t.Errorf("CRI pulls = %d, want %d", got, tc.wantPulls)
			}
			if st.Results[0].ImageRef != imageID("reg/app:1.2") {
				t.Errorf("ImageRef = %q", st.Results[0].ImageRef)
			}
		})
	}
}

func TestFailuresAndRetries(t *testing.T) {
	tests := []struct {
		name         string
		failures     []error
		private      bool
		block        bool
		wantStatus   ImageWorkStatus
		wantReason   string
		wantAttempts int
	}{
		{name: "transient then success", failures: []error{errUnavailable, errUnavailable},
			wantStatus: StatusSucceeded, wantReason: ReasonPulled, wantAttempts: 3},
		{name: "transient until out of attempts", failures: []error{errUnavailable, errUnavailable, errUnavailable, errUnavailable},
			wantStatus: StatusFailed, wantReason: ReasonPullFailed, wantAttempts: 3},
		{name: "registry refuses: permanent", private: true,
			wantStatus: StatusFailed, wantReason: ReasonUnauthorized, wantAttempts: 1},
		{name: "permanent error", failures: []error{errors.New("manifest invalid")},
			wantStatus: StatusFailed, wantReason: ReasonPullFailed, wantAttempts: 1},
		{name: "deadline per request, retried", block: true,
			wantStatus: StatusFailed, wantReason: ReasonTimeout, wantAttempts: 3},
		{name: "service timeout it calls permanent", failures: []error{&serviceError{msg: "slow", timeout: true}},
			wantStatus: StatusFailed, wantReason: ReasonTimeout, wantAttempts: 1},
		{name: "unauthorized wins over transient", failures: []error{fmt.Errorf("pull: %w", &serviceError{msg: "403", unauthorized: true, transient: true})},
			wantStatus: StatusFailed, wantReason: ReasonUnauthorized, wantAttempts: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			f.images.failures["reg/app:1"] = tc.failures
			f.images.blocking["reg/app:1"] = tc.block
			if tc.private {
				f.images.private["reg/app:1"] = "x:y"
			}
			m := f.manager(t, WithRequestTimeout(20*time.Millisecond))
			run(t, m)
			if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/app:1"}}); err != nil {
				t.Fatal(err)
			}
			st := f.sink.wait(t)
			r := st.Results[0]
			if r.Status != tc.wantStatus || r.Reason != tc.wantReason || r.Attempts != tc.wantAttempts {
				t.Errorf("result = %s/%s after %d attempts (%s), want %s/%s after %d",
					r.Status, r.Reason, r.Attempts, r.Message, tc.wantStatus, tc.wantReason, tc.wantAttempts)
			}
			if got := len(f.images.pullCalls()); got != tc.wantAttempts {
				t.Errorf("CRI pulls = %d, want %d", got, tc.wantAttempts)
			}
			if out := f.pulls.outstanding(); len(out) != 0 {
				t.Errorf("intents left behind: %v", out)
			}
		})
	}
}

func TestDedupeInFlight(t *testing.T) {
	f := newFixture()
	f.images.private["reg/shared:1"] = "alice:s3cret"
	bobSameContent := &PullSecret{Namespace: "tenant-b", Name: "other", UID: "uid-b", Username: "alice", Password: "s3cret"}
	m := f.manager(t)
	ctx := context.Background()
	// Queued before Run, so all requests for the image wait together.
	for _, c := range []ImageCache{
		{Namespace: "a", Name: "one", Images: []string{"reg/shared:1"}},
		{Namespace: "b", Name: "two", Images: []string{"reg/shared:1"}},
		{Namespace: "c", Name: "three", Images: []string{"reg/shared:1"}, PullSecret: aliceSecret},
		{Namespace: "d", Name: "four", Images: []string{"reg/shared:1"}, PullSecret: bobSameContent},
	} {
		if err := m.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	run(t, m)
	got := map[string]string{}
	for range 4 {
		st := f.sink.wait(t)
		got[st.ImageCache.String()] = string(st.Results[0].Status) + "/" + st.Results[0].Reason
	}
	want := map[string]string{
		"a/one":   "failed/" + ReasonUnauthorized,
		"b/two":   "failed/" + ReasonUnauthorized,
		"c/three": "succeeded/" + ReasonPulled,
		"d/four":  "succeeded/" + ReasonPulled,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	// One pull per distinct credential: one anonymous attempt for both
	// anonymous caches, one with alice's secret, and one with the other
	// secret of the same content (its coordinates must be recorded too).
	wantPulls := []pullCall{{"reg/shared:1", ""}, {"reg/shared:1", "alice"}, {"reg/shared:1", "alice"}}
	if diff := cmp.Diff(wantPulls, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
	recs := f.pulls.recorded(imageID("reg/shared:1"))
	if len(recs) != 2 {
		t.Fatalf("records = %+v", recs)
	}
	s1, s2 := recs[0].KubernetesSecrets[0], recs[1].KubernetesSecrets[0]
	if s1.Name != "regcred" || s2.Name != "other" || s1.CredentialHash != s2.CredentialHash {
		t.Errorf("records = %+v", recs)
	}
}

func TestRequestsJoinAnInFlightImage(t *testing.T) {
	f := newFixture()
	gate := make(chan struct{})
	f.images.gates["reg/x:1"] = gate
	m := f.manager(t, WithWorkers(4))
	run(t, m)
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "a", Name: "one", Images: []string{"reg/x:1"}}); err != nil {
		t.Fatal(err)
	}
	<-f.images.started // the pull for a/one is in flight
	for _, name := range []string{"two", "three"} {
		if err := m.Apply(ctx, ImageCache{Namespace: "a", Name: name, Images: []string{"reg/x:1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := m.Status("a", "two"); st.Queued != 1 {
		t.Errorf("second request not waiting behind the in-flight one: %+v", st)
	}
	close(gate)
	got := map[string]ImageWorkStatus{}
	for range 3 {
		st := f.sink.wait(t)
		got[st.ImageCache.Name] = st.Results[0].Status
	}
	want := map[string]ImageWorkStatus{"one": StatusSucceeded, "two": StatusAlreadyPulled, "three": StatusAlreadyPulled}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	f.images.mu.Lock()
	defer f.images.mu.Unlock()
	if len(f.images.pulls) != 1 || f.images.maxSame != 1 {
		t.Errorf("pulls = %v, most concurrent pulls of one image = %d; want 1 and 1", f.images.pulls, f.images.maxSame)
	}
}

func TestSupersededBeforeDispatch(t *testing.T) {
	f := newFixture()
	m := f.manager(t)
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1", "reg/b:1"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/b:1"}}); err != nil {
		t.Fatal(err)
	}
	run(t, m)
	create, update := f.sink.wait(t), f.sink.wait(t)
	if create.Batch > update.Batch {
		create, update = update, create
	}
	got := map[string]string{}
	for _, st := range []CacheStatus{create, update} {
		for _, r := range st.Results {
			got[string(r.Request.WorkType)+" "+r.Request.Image] = string(r.Status) + "/" + r.Reason
		}
	}
	want := map[string]string{
		"create reg/a:1": "unknown/" + ReasonSuperseded,
		"create reg/b:1": "succeeded/" + ReasonPulled,
		"purge reg/a:1":  "succeeded/" + ReasonNotPresent,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]pullCall{{"reg/b:1", ""}}, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
}

func TestOrderingWithOneWorker(t *testing.T) {
	f := newFixture()
	m := f.manager(t, WithWorkers(1))
	images := []string{"reg/c:1", "reg/a:1", "reg/b:1"}
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: images}); err != nil {
		t.Fatal(err)
	}
	run(t, m)
	st := f.sink.wait(t)
	var pulled, reported []string
	for _, p := range f.images.pullCalls() {
		pulled = append(pulled, p.Image)
	}
	for _, r := range f.sink.all() {
		reported = append(reported, r.Request.Image)
	}
	if diff := cmp.Diff(images, pulled); diff != "" {
		t.Errorf("pull order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(images, reported); diff != "" {
		t.Errorf("result order (-want +got):\n%s", diff)
	}
	f.sink.mu.Lock()
	events := append([]string(nil), f.sink.events...)
	f.sink.mu.Unlock()
	if last := events[len(events)-1]; last != "status ns/c 1" {
		t.Errorf("status not after all results: %v", events)
	}
	if st.Counts[StatusSucceeded] != 3 || st.Queued != 0 || st.InFlight != 0 {
		t.Errorf("status = %+v", st)
	}
}

func TestUpdateDeleteAndPurge(t *testing.T) {
	f := newFixture()
	records := newFakeRecords()
	f.pulls.store = records
	m := f.manager(t)
	run(t, m)
	ctx := context.Background()
	apply := func(c ImageCache) CacheStatus {
		t.Helper()
		if err := m.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		return f.sink.wait(t)
	}
	apply(ImageCache{Namespace: "ns", Name: "one", Images: []string{"reg/a:1", "reg/b:1"}})
	apply(ImageCache{Namespace: "ns", Name: "two", Images: []string{"reg/c:1"}})

	st := apply(ImageCache{Namespace: "ns", Name: "one", Images: []string{"reg/b:1", "reg/c:1"}})
	got := map[string]string{}
	for _, r := range st.Results {
		got[string(r.Request.WorkType)+" "+r.Request.Image] = string(r.Status) + "/" + r.Reason
	}
	want := map[string]string{
		"update reg/c:1": "alreadypulled/" + ReasonAlreadyPresent,
		"purge reg/a:1":  "succeeded/" + ReasonRemoved,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("update batch (-want +got):\n%s", diff)
	}
	if st.WorkType != WorkTypeUpdate {
		t.Errorf("batch work type = %s", st.WorkType)
	}
	if f.images.has("reg/a:1") {
		t.Error("purged image still present")
	}
	if _, ok, _ := records.GetImagePulledRecord(imageID("reg/a:1")); ok {
		t.Error("purged image's record still present")
	}

	if err := m.Delete(ctx, "ns", "one"); err != nil {
		t.Fatal(err)
	}
	st = f.sink.wait(t)
	got = map[string]string{}
	for _, r := range st.Results {
		got[string(r.Request.WorkType)+" "+r.Request.Image] = string(r.Status) + "/" + r.Reason
	}
	want = map[string]string{
		"delete reg/b:1": "succeeded/" + ReasonRemoved,
		"delete reg/c:1": "succeeded/" + ReasonKeptByOther,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delete batch (-want +got):\n%s", diff)
	}
	if !f.images.has("reg/c:1") || f.images.has("reg/b:1") {
		t.Error("wrong images removed")
	}
	if _, ok, _ := records.GetImagePulledRecord(imageID("reg/c:1")); !ok {
		t.Error("kept image lost its record")
	}
	if err := m.Delete(ctx, "ns", "one"); !errors.Is(err, ErrCacheNotFound) {
		t.Errorf("second Delete = %v, want ErrCacheNotFound", err)
	}
	if diff := cmp.Diff([]string{"ns/two"}, refs(m.Caches())); diff != "" {
		t.Errorf("caches (-want +got):\n%s", diff)
	}
}

func refs(cs []ImageCache) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Ref().String())
	}
	return out
}

func TestShutdownGivesEveryRequestAResult(t *testing.T) {
	f := newFixture()
	f.images.blocking["reg/a:1"] = true
	m := f.manager(t, WithWorkers(1))
	stop := run(t, m)
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1", "reg/b:1", "reg/c:1"}}); err != nil {
		t.Fatal(err)
	}
	<-f.images.started // the first pull is in flight
	if st, ok := m.Status("ns", "c"); !ok || st.Counts[StatusJobCreated] != 1 || st.Queued != 2 {
		t.Errorf("status while in flight = %+v", st)
	}
	stop()
	st := f.sink.wait(t)
	if st.Requests != 3 || st.Counts[StatusUnknown] != 3 {
		t.Fatalf("status after shutdown = %+v", st)
	}
	for _, r := range st.Results {
		if r.Reason != ReasonShutDown {
			t.Errorf("%s: reason %s, want %s", r.Request.Image, r.Reason, ReasonShutDown)
		}
	}
	if out := f.pulls.outstanding(); len(out) != 0 {
		t.Errorf("intents left behind: %v", out)
	}
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "d", Images: []string{"x"}}); !errors.Is(err, ErrShutDown) {
		t.Errorf("Apply after shutdown = %v, want ErrShutDown", err)
	}
	if err := m.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
	}
}

func TestRestartResumes(t *testing.T) {
	dir := t.TempDir()
	f := newFixture()
	f.images.blocking["reg/b:1"] = true
	m1 := f.manager(t, WithWorkers(1), WithStateDir(dir))
	stop := run(t, m1)
	ctx := context.Background()
	if err := m1.Apply(ctx, ImageCache{Namespace: "ns", Name: "keep", Images: []string{"reg/x:1"}}); err != nil {
		t.Fatal(err)
	}
	f.sink.wait(t)
	if err := m1.Apply(ctx, ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1", "reg/b:1", "reg/c:1"}, PullSecret: aliceSecret}); err != nil {
		t.Fatal(err)
	}
	if err := m1.Delete(ctx, "ns", "keep"); err != nil { // queued behind the blocking pull
		t.Fatal(err)
	}
	for img := range f.images.started {
		if img == "reg/b:1" {
			break
		}
	}
	stop()
	first := map[CacheRef]CacheStatus{}
	for range 2 {
		st := f.sink.wait(t)
		first[st.ImageCache] = st
	}
	if got := first[CacheRef{"ns", "c"}]; got.Counts[StatusSucceeded] != 1 || got.Counts[StatusUnknown] != 2 {
		t.Errorf("first run status of ns/c = %+v", got)
	}
	if got := first[CacheRef{"ns", "keep"}]; got.Counts[StatusUnknown] != 1 {
		t.Errorf("first run status of ns/keep = %+v", got)
	}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, stateFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v", fi.Mode())
	}
	if !strings.Contains(string(data), `"completedGeneration":0`) || !strings.Contains(string(data), `"image":"reg/x:1"`) {
		t.Errorf("interrupted work not pending in state: %s", data)
	}

	// The "runtime" comes back; a new manager on the same dir resumes.
	f.images.mu.Lock()
	f.images.blocking["reg/b:1"] = false
	f.images.mu.Unlock()
	f2 := &fixture{images: f.images, pulls: f.pulls, sink: newSink(), clock: f.clock}
	m2 := f2.manager(t, WithWorkers(1), WithStateDir(dir))
	if diff := cmp.Diff([]string{"ns/c"}, refs(m2.Caches())); diff != "" {
		t.Errorf("loaded caches (-want +got):\n%s", diff)
	}
	run(t, m2)
	resumed := map[CacheRef]CacheStatus{}
	for range 2 {
		st := f2.sink.wait(t)
		resumed[st.ImageCache] = st
	}
	c := resumed[CacheRef{"ns", "c"}]
	if c.WorkType != WorkTypeCreate || c.Requests != 3 || c.Counts[StatusAlreadyPulled] != 1 || c.Counts[StatusSucceeded] != 2 {
		t.Errorf("resumed create = %+v", c)
	}
	if d := resumed[CacheRef{"ns", "keep"}]; d.WorkType != WorkTypeDelete || d.Counts[StatusSucceeded] != 1 || d.Results[0].Reason != ReasonRemoved {
		t.Errorf("resumed delete = %+v", d)
	}
	if f.images.has("reg/x:1") {
		t.Error("resumed delete did not remove the image")
	}
	if out := f.pulls.outstanding(); len(out) != 0 {
		t.Errorf("intents left behind: %v", out)
	}
	for _, p := range f.images.pullCalls() {
		if p.Image == "reg/b:1" && p.User != "alice" {
			t.Errorf("resumed pull without the cache's credentials: %+v", p)
		}
	}

	// Everything done: a third manager has nothing to resume.
	f3 := &fixture{images: f.images, pulls: f.pulls, sink: newSink(), clock: f.clock}
	m3 := f3.manager(t, WithStateDir(dir))
	if _, ok := m3.Status("ns", "c"); ok {
		t.Error("third manager resumed finished work")
	}
	if _, ok := m3.Status("ns", "keep"); ok {
		t.Error("third manager resumed a finished removal")
	}
}

func TestCorruptState(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"version":1,"bogus":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateTmpPrefix+"123"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(klog.Background(), newFakeImages(), newFakePulls(), WithStateDir(dir))
	if !errors.Is(err, ErrState) {
		t.Errorf("New on corrupt state = %v, want ErrState", err)
	}
	if _, err := os.Stat(filepath.Join(dir, stateTmpPrefix+"123")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stray temp file not swept: %v", err)
	}
}

func TestValidation(t *testing.T) {
	f := newFixture()
	m := f.manager(t)
	ctx := context.Background()
	for _, c := range []ImageCache{
		{Name: "x", Images: []string{"a"}},
		{Namespace: "x", Images: []string{"a"}},
		{Namespace: "x", Name: "y", Images: []string{""}},
		{Namespace: "x", Name: "y", RefreshInterval: -time.Second},
	} {
		if err := m.Apply(ctx, c); !errors.Is(err, ErrInvalidCache) {
			t.Errorf("Apply(%+v) = %v, want ErrInvalidCache", c, err)
		}
	}
	if err := m.Refresh(ctx, "no", "such"); !errors.Is(err, ErrCacheNotFound) {
		t.Errorf("Refresh = %v, want ErrCacheNotFound", err)
	}
	// An empty cache completes at once.
	if err := m.Apply(ctx, ImageCache{Namespace: "x", Name: "empty"}); err != nil {
		t.Fatal(err)
	}
	if st := f.sink.wait(t); !st.Complete || st.Requests != 0 {
		t.Errorf("empty cache status = %+v", st)
	}
}

func TestPeriodicAndManualRefresh(t *testing.T) {
	f := newFixture()
	m := f.manager(t, WithRefreshCheckPeriod(10*time.Second))
	run(t, m)
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1"}, RefreshInterval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.sink.wait(t)

	// The image disappears (kubelet GC); the periodic refresh brings it back.
	if err := f.images.RemoveImage(ctx, "reg/a:1"); err != nil {
		t.Fatal(err)
	}
	for !f.clock.HasWaiters() {
		time.Sleep(time.Millisecond) // wait for the refresh loop's ticker
	}
	f.clock.Step(time.Minute)
	st := f.sink.wait(t)
	if st.WorkType != WorkTypeRefresh || st.Counts[StatusSucceeded] != 1 || st.Results[0].Request.WorkType != WorkTypeRefresh {
		t.Errorf("periodic refresh status = %+v", st)
	}
	if !f.images.has("reg/a:1") {
		t.Error("refresh did not pull the missing image")
	}
	if err := m.Refresh(ctx, "ns", "c"); err != nil {
		t.Fatal(err)
	}
	if st := f.sink.wait(t); st.Counts[StatusAlreadyPulled] != 1 {
		t.Errorf("manual refresh status = %+v", st)
	}
}

func TestMetrics(t *testing.T) {
	f := newFixture()
	f.images.private["reg/p:1"] = "u:p"
	m := f.manager(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collectors()...)
	run(t, m)
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1", "reg/p:1"}}); err != nil {
		t.Fatal(err)
	}
	f.sink.wait(t)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range families {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				got[key] = mt.GetGauge().GetValue()
			case mt.GetHistogram() != nil:
				got[key] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"imagecache_queue_depth":                                     0,
		"imagecache_results_total status=failed work_type=create":    1,
		"imagecache_results_total status=succeeded work_type=create": 1,
		"imagecache_pulls_total result=failed":                       1,
		"imagecache_pulls_total result=succeeded":                    1,
		"imagecache_pull_duration_seconds result=failed":             1,
		"imagecache_pull_duration_seconds result=succeeded":          1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

package imagecache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fakeclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/atomicfile"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// fixture is an in-process manager's surroundings: the fake runtime
// (critest's gRPC fake), the image service the managers are given (svc: the
// real cri client dialled to it, unless a test puts another image service in
// front of that), and the real pull manager (NeverVerifyPreloadedImages, the
// kubelet's default policy) over an in-memory store. The pull manager sees
// the store through records, which logs its calls and can fail them.
type fixture struct {
	images  *fakeRuntime
	svc     ImageService
	store   *memstore.Store
	records *accessortest.FaultyAccessor
	pulls   *pullmanager.PullManager
	sink    *sink
	clock   *fakeclock.FakeClock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{images: newFakeRuntime(t), store: memstore.New(), sink: newSink(), clock: fakeclock.NewFakeClock(t0)}
	f.svc = f.images.client
	f.records = accessortest.Faulty(f.store)
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	f.pulls, err = pullmanager.NewImagePullManager(ctx, f.records.Accessor(), policy, nil, pullmanager.WithClock(f.clock))
	if err != nil {
		t.Fatal(err)
	}
	f.records.TakeCalls() // start-up recovery's reads
	return f
}

// restarted returns a fixture for the next manager on the same node: the
// same runtime, pull manager and clock, and a new sink.
func (f *fixture) restarted() *fixture {
	g := *f
	g.sink = newSink()
	return &g
}

// seed records, through the pull manager, that image was pulled with c;
// the runtime is left as it is.
func (f *fixture) seed(t *testing.T, image string, c accessor.ImagePullCredentials) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	if err := f.pulls.RecordPullIntent(klog.FromContext(ctx), image); err != nil {
		t.Fatal(err)
	}
	f.pulls.RecordImagePulled(ctx, image, imageID(image), &c)
	f.records.TakeCalls()
}

// mapping returns the credential mapping of the stored pulled record of
// imageRef, and nil when there is no record.
func (f *fixture) mapping(t *testing.T, imageRef string) map[string]accessor.ImagePullCredentials {
	t.Helper()
	rec, ok, err := f.store.GetImagePulledRecord(imageRef)
	if err != nil {
		t.Fatalf("GetImagePulledRecord(%s): %v", imageRef, err)
	}
	if !ok {
		return nil
	}
	return rec.CredentialMapping
}

// intentsLeft returns the images whose stored pull intent is still there:
// an intent not followed by a pulled or failed record.
func (f *fixture) intentsLeft(t *testing.T) []string {
	t.Helper()
	intents, err := f.store.ListImagePullIntents()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range intents {
		out = append(out, in.Image)
	}
	return out
}

// storeWrites returns the writes and deletes that reached the store, in
// order, as "Method key".
func (f *fixture) storeWrites() []string {
	var out []string
	for _, c := range f.records.Calls() {
		if strings.HasPrefix(c.Method, "Write") || strings.HasPrefix(c.Method, "Delete") {
			out = append(out, c.String())
		}
	}
	return out
}

func (f *fixture) manager(t *testing.T, opts ...Option) *Manager {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	all := append([]Option{withClock(f.clock), WithRetries(3, time.Millisecond, 5*time.Millisecond),
		WithNode("node-1", "containerd://1.6.20")}, f.sink.options()...)
	m, err := New(logger, f.svc, f.pulls, append(all, opts...)...)
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
	f := newFixture(t)
	f.images.requireAuth("reg/private:v1", "alice:s3cret")
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
	wantRec := map[string]accessor.ImagePullCredentials{"reg/private": {KubernetesSecrets: []accessor.ImagePullSecret{{UID: "uid-a", Namespace: "tenant-a", Name: "regcred", CredentialHash: hash}}}}
	if diff := cmp.Diff(wantRec, f.mapping(t, imageID("reg/private:v1"))); diff != "" {
		t.Errorf("private record (-want +got):\n%s", diff)
	}
	wantAnon := map[string]accessor.ImagePullCredentials{"reg/public": {NodePodsAccessible: true}}
	if diff := cmp.Diff(wantAnon, f.mapping(t, imageID("reg/public:v1"))); diff != "" {
		t.Errorf("anonymous record (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]pullCall{{"reg/private:v1", "alice"}, {"reg/public:v1", ""}}, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
	// Each pull is an intent, then the record, then the intent's removal.
	wantWrites := []string{
		"WriteImagePullIntent reg/private:v1", "WriteImagePulledRecord " + imageID("reg/private:v1"), "DeleteImagePullIntent reg/private:v1",
		"WriteImagePullIntent reg/public:v1", "WriteImagePulledRecord " + imageID("reg/public:v1"), "DeleteImagePullIntent reg/public:v1",
	}
	if diff := cmp.Diff(wantWrites, f.storeWrites()); diff != "" {
		t.Errorf("pull record writes (-want +got):\n%s", diff)
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
			f := newFixture(t)
			f.images.preload(tc.preload...)
			if tc.seed != nil {
				f.seed(t, "reg/app:1.2", *tc.seed)
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
		classifyAs   *serviceError // the service's own client classifies its errors (selfClassified)
		wantStatus   ImageWorkStatus
		wantReason   string
		wantAttempts int
	}{
		{name: "transient then success", failures: []error{errRuntimeBusy, errRuntimeBusy},
			wantStatus: StatusSucceeded, wantReason: ReasonPulled, wantAttempts: 3},
		{name: "transient until out of attempts", failures: []error{errRuntimeBusy, errRuntimeBusy, errRuntimeBusy, errRuntimeBusy},
			wantStatus: StatusFailed, wantReason: ReasonPullFailed, wantAttempts: 3},
		{name: "registry refuses: permanent", private: true,
			wantStatus: StatusFailed, wantReason: ReasonUnauthorized, wantAttempts: 1},
		{name: "permanent error", failures: []error{errors.New("manifest invalid")},
			wantStatus: StatusFailed, wantReason: ReasonPullFailed, wantAttempts: 1},
		{name: "deadline per request, retried", block: true,
			wantStatus: StatusFailed, wantReason: ReasonTimeout, wantAttempts: 3},
		{name: "service timeout it calls permanent", failures: []error{status.Error(codes.Unknown, "slow")}, classifyAs: &serviceError{timeout: true},
			wantStatus: StatusFailed, wantReason: ReasonTimeout, wantAttempts: 1},
		{name: "unauthorized wins over transient", failures: []error{status.Error(codes.Unavailable, "pull: 403 Forbidden")},
			wantStatus: StatusFailed, wantReason: ReasonUnauthorized, wantAttempts: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.images.fail("reg/app:1", tc.failures...)
			f.images.block("reg/app:1", tc.block)
			if tc.private {
				f.images.requireAuth("reg/app:1", "x:y")
			}
			if tc.classifyAs != nil {
				f.svc = selfClassified{f.svc, *tc.classifyAs}
			}
			// Only the blocking case needs its deadline to pass; every
			// other one must not time out on a loaded machine.
			timeout := time.Minute
			if tc.block {
				timeout = 20 * time.Millisecond
			}
			m := f.manager(t, WithRequestTimeout(timeout))
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
			if out := f.intentsLeft(t); len(out) != 0 {
				t.Errorf("intents left behind: %v", out)
			}
		})
	}
}

func TestDedupeInFlight(t *testing.T) {
	f := newFixture(t)
	f.images.requireAuth("reg/shared:1", "alice:s3cret")
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
	// The other secret of the same content is not pulled with again: the
	// pull manager accepts a secret whose credential hash is recorded (as the
	// kubelet does) and records its coordinates at the check.
	want := map[string]string{
		"a/one":   "failed/" + ReasonUnauthorized,
		"b/two":   "failed/" + ReasonUnauthorized,
		"c/three": "succeeded/" + ReasonPulled,
		"d/four":  "alreadypulled/" + ReasonAlreadyPresent,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	// One attempt per distinct credential: one anonymous attempt for both
	// anonymous caches, one with alice's secret.
	wantPulls := []pullCall{{"reg/shared:1", ""}, {"reg/shared:1", "alice"}}
	if diff := cmp.Diff(wantPulls, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
	// Both secrets' coordinates are recorded, with the one hash.
	hash := credentialHash(aliceSecret)
	wantRec := map[string]accessor.ImagePullCredentials{"reg/shared": {KubernetesSecrets: []accessor.ImagePullSecret{
		{UID: "uid-a", Namespace: "tenant-a", Name: "regcred", CredentialHash: hash},
		{UID: "uid-b", Namespace: "tenant-b", Name: "other", CredentialHash: hash},
	}}}
	if diff := cmp.Diff(wantRec, f.mapping(t, imageID("reg/shared:1"))); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
}

func TestRequestsJoinAnInFlightImage(t *testing.T) {
	f := newFixture(t)
	gate := make(chan struct{})
	f.images.gate("reg/x:1", gate)
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
	// One pull in all: no two pulls of the image ran at once.
	if pulls := f.images.pullCalls(); len(pulls) != 1 {
		t.Errorf("pulls = %v, want 1", pulls)
	}
}

func TestSupersededBeforeDispatch(t *testing.T) {
	f := newFixture(t)
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
	f := newFixture(t)
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
	f := newFixture(t)
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
	if _, ok, _ := f.store.GetImagePulledRecord(imageID("reg/a:1")); ok {
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
	if _, ok, _ := f.store.GetImagePulledRecord(imageID("reg/c:1")); !ok {
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
	f := newFixture(t)
	f.images.block("reg/a:1", true)
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
	if out := f.intentsLeft(t); len(out) != 0 {
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
	f := newFixture(t)
	f.images.block("reg/b:1", true)
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
	f.images.block("reg/b:1", false)
	f2 := f.restarted()
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
	if out := f.intentsLeft(t); len(out) != 0 {
		t.Errorf("intents left behind: %v", out)
	}
	for _, p := range f.images.pullCalls() {
		if p.Image == "reg/b:1" && p.User != "alice" {
			t.Errorf("resumed pull without the cache's credentials: %+v", p)
		}
	}

	// Everything done: a third manager has nothing to resume.
	f3 := f.restarted()
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
	stray := filepath.Join(dir, atomicfile.TempName(stateFile))
	if err := os.WriteFile(stray, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	_, err := New(klog.Background(), f.svc, f.pulls, WithStateDir(dir))
	if !errors.Is(err, ErrState) {
		t.Errorf("New on corrupt state = %v, want ErrState", err)
	}
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stray temp file not swept: %v", err)
	}
}

func TestValidation(t *testing.T) {
	f := newFixture(t)
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
	f := newFixture(t)
	m := f.manager(t, withRefreshCheckPeriod(10*time.Second))
	run(t, m)
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1"}, RefreshInterval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.sink.wait(t)

	// The image disappears (kubelet GC); the periodic refresh brings it back.
	if err := f.images.client.RemoveImage(ctx, "reg/a:1"); err != nil {
		t.Fatal(err)
	}
	// Wait for the refresh loop's ticker; fail rather than hang if it never
	// comes.
	for i := 0; !f.clock.HasWaiters(); i++ {
		if i == 60_000 {
			t.Fatal("the refresh loop never waited on the clock (test hung)")
		}
		time.Sleep(time.Millisecond)
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
	f := newFixture(t)
	f.images.requireAuth("reg/p:1", "u:p")
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

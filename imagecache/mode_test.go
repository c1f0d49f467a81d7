package imagecache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
)

// standalone returns a standalone manager over the fixture's images.
func (f *fixture) standalone(t *testing.T, opts ...Option) *Manager {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	all := append([]Option{withClock(f.clock), WithRetries(3, time.Millisecond, 5*time.Millisecond),
		WithNode("node-1", "containerd://1.6.20")}, f.sink.options()...)
	m, err := NewStandalone(logger, f.svc, append(all, opts...)...)
	if err != nil {
		t.Fatalf("NewStandalone: %v", err)
	}
	return m
}

func TestModes(t *testing.T) {
	f := newFixture(t)
	if got := f.manager(t).Mode(); got != ModeInProcess {
		t.Errorf("New: mode %q, want %q", got, ModeInProcess)
	}
	if got := f.standalone(t).Mode(); got != ModeStandalone {
		t.Errorf("NewStandalone: mode %q, want %q", got, ModeStandalone)
	}
	// An in-process manager needs its pull manager; nil is not a way to
	// get a standalone one by accident.
	logger, _ := ktesting.NewTestContext(t)
	if _, err := New(logger, f.svc, nil); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "NewStandalone") {
		t.Errorf("New with a nil pull manager: %v, want ErrInvalidOption pointing to NewStandalone", err)
	}
	if _, err := NewStandalone(logger, nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewStandalone with a nil image service: %v, want ErrInvalidOption", err)
	}
}

// A standalone manager refuses a cache with a pull secret with a typed
// error, before anything is persisted or queued.
func TestStandaloneRefusesPrivateCache(t *testing.T) {
	f := newFixture(t)
	dir := filepath.Join(t.TempDir(), "state")
	m := f.standalone(t, WithStateDir(dir))
	err := m.Apply(context.Background(), ImageCache{Namespace: "tenant-a", Name: "warm", Images: []string{"reg/private:v1"}, PullSecret: aliceSecret})
	if !errors.Is(err, ErrPrivateImage) {
		t.Fatalf("Apply = %v, want ErrPrivateImage", err)
	}
	var pe *PrivateImageError
	if !errors.As(err, &pe) || pe.Cache != (CacheRef{"tenant-a", "warm"}) || pe.Secret != "tenant-a/regcred" {
		t.Fatalf("Apply error = %#v, want a *PrivateImageError naming the cache and secret", err)
	}
	msg := err.Error()
	for _, want := range []string{"in-process", "let the kubelet pull it", "imagePullSecrets"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not mention %q", msg, want)
		}
	}
	for _, secret := range []string{aliceSecret.Password, credentialHash(aliceSecret)} {
		if strings.Contains(msg, secret) {
			t.Errorf("message %q shows a credential", msg)
		}
	}
	if got := m.Caches(); len(got) != 0 {
		t.Errorf("Caches after a refused Apply = %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file written for a refused cache: %v", err)
	}
	// Even an empty secret is a secret.
	if err := m.Apply(context.Background(), ImageCache{Namespace: "a", Name: "b", Images: []string{"x"}, PullSecret: &PullSecret{}}); !errors.Is(err, ErrPrivateImage) {
		t.Errorf("Apply with an empty secret = %v, want ErrPrivateImage", err)
	}
}

// A standalone manager pulls anonymously, treats a present image as
// pulled, and calls no pull manager (it has none).
func TestStandalonePullsAnonymouslyAndRecordsNothing(t *testing.T) {
	f := newFixture(t)
	f.images.preload("reg/present:1")
	m := f.standalone(t)
	run(t, m)
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ops", Name: "public", Images: []string{"reg/present:1", "reg/public:1"}}); err != nil {
		t.Fatal(err)
	}
	st := f.sink.wait(t)
	got := map[string]string{}
	for _, r := range st.Results {
		got[r.Request.Image] = string(r.Status) + "/" + r.Reason
	}
	want := map[string]string{"reg/present:1": "alreadypulled/AlreadyPresent", "reg/public:1": "succeeded/Pulled"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]pullCall{{"reg/public:1", ""}}, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
	for _, r := range st.Results {
		if r.Request.Image == "reg/public:1" && r.ImageRef != imageID("reg/public:1") {
			t.Errorf("pulled image ref = %q, want the image ID", r.ImageRef)
		}
	}
	// The fixture's pull manager was never handed over.
	if calls := f.records.Calls(); len(calls) != 0 {
		t.Errorf("pull record calls: %v", calls)
	}
}

// A cache with a pull secret that an in-process manager applied to the same
// state directory is kept, but a standalone manager pulls none of its
// images: each request fails with ReasonPrivateImage without reaching the
// runtime. Anonymous caches beside it are worked as usual.
func TestStandaloneFailsPrivateCacheFromState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	f := newFixture(t)
	f.images.requireAuth("reg/private:v1", "alice:s3cret")
	inProc := f.manager(t, WithStateDir(dir))
	ctx := context.Background()
	if err := inProc.Apply(ctx, ImageCache{Namespace: "tenant-a", Name: "warm", Images: []string{"reg/private:v1"}, PullSecret: aliceSecret}); err != nil {
		t.Fatal(err)
	}
	if err := inProc.Apply(ctx, ImageCache{Namespace: "ops", Name: "public", Images: []string{"reg/public:1"}}); err != nil {
		t.Fatal(err)
	}
	// inProc never runs: both batches are left pending in the state dir.

	g := newFixture(t)
	g.images, g.svc = f.images, f.svc
	m := g.standalone(t, WithStateDir(dir))
	if n := len(m.Caches()); n != 2 {
		t.Fatalf("standalone manager loaded %d caches, want 2", n)
	}
	run(t, m)
	byCache := map[CacheRef]CacheStatus{}
	for range 2 {
		st := g.sink.wait(t)
		byCache[st.ImageCache] = st
	}
	priv := byCache[CacheRef{"tenant-a", "warm"}]
	if len(priv.Results) != 1 || priv.Results[0].Status != StatusFailed || priv.Results[0].Reason != ReasonPrivateImage ||
		!strings.Contains(priv.Results[0].Message, "let the kubelet pull it") {
		t.Errorf("private cache results = %+v, want one failed %s", priv.Results, ReasonPrivateImage)
	}
	pub := byCache[CacheRef{"ops", "public"}]
	if len(pub.Results) != 1 || pub.Results[0].Status != StatusSucceeded {
		t.Errorf("public cache results = %+v", pub.Results)
	}
	if diff := cmp.Diff([]pullCall{{"reg/public:1", ""}}, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
	if err := m.Refresh(ctx, "tenant-a", "warm"); err != nil {
		t.Fatal(err)
	}
	if st := g.sink.wait(t); st.Counts[StatusFailed] != 1 {
		t.Errorf("refresh of the private cache = %+v, want 1 failed", st.Counts)
	}
}

// A standalone manager removes images of a deleted cache, and prunes no
// record (it has no pull manager).
func TestStandaloneDeleteRemoves(t *testing.T) {
	f := newFixture(t)
	m := f.standalone(t)
	run(t, m)
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "ops", Name: "public", Images: []string{"reg/public:1"}}); err != nil {
		t.Fatal(err)
	}
	f.sink.wait(t)
	if err := m.Delete(ctx, "ops", "public"); err != nil {
		t.Fatal(err)
	}
	st := f.sink.wait(t)
	if len(st.Results) != 1 || st.Results[0].Reason != ReasonRemoved {
		t.Errorf("delete results = %+v", st.Results)
	}
	if f.images.has("reg/public:1") {
		t.Error("image not removed")
	}
}

package crishim

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

// fakeRuntime plays the runtime around a pull: what names point to, and
// which names and unnamed images the gate removed.
type fakeRuntime struct {
	mu        sync.Mutex
	names     map[string]RuntimeImage // as the kubelet sends them
	statusErr error
	removed   []string // "name→imageID"
	unnamed   []string
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{names: map[string]RuntimeImage{}} }

func (f *fakeRuntime) set(name string, img RuntimeImage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names[name] = img
}

func (f *fakeRuntime) ImageStatus(_ context.Context, name string) (RuntimeImage, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statusErr != nil {
		return RuntimeImage{}, false, f.statusErr
	}
	img, ok := f.names[name]
	return img, ok, nil
}

func (f *fakeRuntime) RemoveName(_ context.Context, name, imageID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, name+"→"+imageID)
	return nil
}

func (f *fakeRuntime) RemoveUnnamed(_ context.Context, imageID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unnamed = append(f.unnamed, imageID)
	return nil
}

func (f *fakeRuntime) removals() (names, unnamed []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed), slices.Clone(f.unnamed)
}

const (
	imageIDA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	imageIDB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	// otherRepo is where tenant A's image came from: the same content
	// under another repository.
	otherRepo = "origin.example.com/tenant-a/app"
)

// pullAs returns a pull function that plays the runtime: the name then
// points to img, and the pull answers its ID.
func pullAs(rt *fakeRuntime, name string, img RuntimeImage, calls *int) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		*calls++
		rt.set(name, img)
		return img.ID, nil
	}
}

func newPullFixture(t *testing.T, edit func(*Config)) (*fixture, *fakeRuntime) {
	t.Helper()
	rt := newFakeRuntime()
	var f *fixture
	f = newFixture(t, func(c *Config) {
		c.Runtime = rt
		if edit != nil {
			edit(c)
		}
	})
	return f, rt
}

// Tenant B's registry proved one digest for the tag and served the runtime
// another (tenant A's image, already on the node): the pull is refused
// after the fact, the names it created go, tenant A's names and content
// stay, and nothing is recorded for B.
func TestPullRefusesContentOtherThanProved(t *testing.T) {
	f, rt := newPullFixture(t, nil)
	f.verifier.allow(authB, privRepo, digest1) // what B's registry proved
	image := privRepo + ":v1"
	aImage := RuntimeImage{ID: imageIDA, RepoDigests: []string{otherRepo + "@" + digest2, privRepo + "@" + digest2}}
	calls := 0
	_, err := f.gate.Pull(testContext(t), Request{Image: image, Auth: authB, Pod: tenantB}, pullAs(rt, image, aImage, &calls))
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrUnverifiedContent) {
		t.Fatalf("Pull = %v; want a refusal for unverified content", err)
	}
	var re *RefusalError
	if !errors.As(err, &re) || !re.After {
		t.Errorf("refusal %v is not marked as after the pull", err)
	}
	if calls != 1 {
		t.Errorf("pull ran %d times, want 1", calls)
	}
	names, unnamed := rt.removals()
	want := []string{privRepo + ":v1→" + imageIDA, privRepo + "@" + digest2 + "→" + imageIDA}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("removed names (-want +got):\n%s", diff)
	}
	for _, n := range names {
		if n == otherRepo+"@"+digest2+"→"+imageIDA {
			t.Error("tenant A's own name was removed")
		}
	}
	if diff := cmp.Diff([]string{imageIDA}, unnamed); diff != "" {
		t.Errorf("unnamed removals (-want +got):\n%s", diff)
	}
	if r := f.record(t, imageIDA); r != nil {
		t.Errorf("the refused pull was recorded: %+v", r)
	}
}

// The runtime holds what the origin proved: admitted and recorded, nothing
// removed; a digest reference and a tag whose digest the origin proved.
func TestPullAdmitsWhatWasProved(t *testing.T) {
	for _, image := range []string{privRepo + "@" + digest1, privRepo + ":v1"} {
		t.Run(image, func(t *testing.T) {
			f, rt := newPullFixture(t, nil)
			f.verifier.allow(authA, privRepo, digest1)
			img := RuntimeImage{ID: imageIDA, RepoDigests: []string{privRepo + "@" + digest1}}
			calls := 0
			ref, err := f.gate.Pull(testContext(t), Request{Image: image, Auth: authA, Pod: tenantA}, pullAs(rt, image, img, &calls))
			if err != nil || ref != imageIDA {
				t.Fatalf("Pull = %q, %v; want %s", ref, err, imageIDA)
			}
			if names, unnamed := rt.removals(); len(names)+len(unnamed) != 0 {
				t.Errorf("removed %v %v after an admitted pull", names, unnamed)
			}
			r := f.record(t, imageIDA)
			if r == nil || len(r.CredentialMapping[privRepo].KubernetesSecrets) != 1 {
				t.Errorf("record of the pull = %+v; want tenant A's secret", r)
			}
		})
	}
}

// Names that were there before the refused pull, or that a verified pull
// recorded, are not the refused pull's to take back.
func TestPullUndoKeepsNamesItDidNotCreate(t *testing.T) {
	f, rt := newPullFixture(t, nil)
	f.verifier.allow(authB, privRepo, digest1)
	image := privRepo + ":v1"
	aImage := RuntimeImage{ID: imageIDA, RepoDigests: []string{privRepo + "@" + digest2}}
	rt.set(image, aImage) // the tag pointed there before the pull
	// A verified pull once recorded repository@digest2.
	f.gate.cfg.Records.RecordImagePulled(testContext(t), privRepo+"@"+digest2, privRepo+"@"+digest2,
		&accessor.ImagePullCredentials{NodePodsAccessible: true})
	calls := 0
	_, err := f.gate.Pull(testContext(t), Request{Image: image, Auth: authB, Pod: tenantB}, pullAs(rt, image, aImage, &calls))
	if !errors.Is(err, ErrUnverifiedContent) {
		t.Fatalf("Pull = %v; want a refusal", err)
	}
	if names, _ := rt.removals(); len(names) != 0 {
		t.Errorf("removed %v; want no name (both existed before)", names)
	}
}

// The gate cannot tell what the runtime pulled: refused (fail closed), and
// no name is removed on a guess.
func TestPullFailsClosedWhenTheRuntimeCannotSay(t *testing.T) {
	image := privRepo + ":v1"
	for name, tc := range map[string]struct {
		statusErr error
		after     *RuntimeImage // what the name points to after the pull
	}{
		"status fails":          {statusErr: errors.New("runtime unavailable")},
		"name points elsewhere": {after: &RuntimeImage{ID: imageIDB, RepoDigests: []string{privRepo + "@" + digest1}}},
		"name absent":           {},
	} {
		t.Run(name, func(t *testing.T) {
			f, rt := newPullFixture(t, nil)
			f.verifier.allow(authA, privRepo, digest1)
			pull := func(context.Context) (string, error) {
				rt.mu.Lock()
				rt.statusErr = tc.statusErr
				rt.mu.Unlock()
				if tc.after != nil {
					rt.set(image, *tc.after)
				}
				return imageIDA, nil
			}
			_, err := f.gate.Pull(testContext(t), Request{Image: image, Auth: authA, Pod: tenantA}, pull)
			if !errors.Is(err, ErrUnverifiedContent) {
				t.Fatalf("Pull = %v; want a refusal", err)
			}
			if names, _ := rt.removals(); len(names) != 0 {
				t.Errorf("removed %v on a guess", names)
			}
			if r := f.record(t, imageIDA); r != nil {
				t.Errorf("recorded %+v", r)
			}
		})
	}
}

// A refusal before the pull never runs it; the runtime's own error is
// returned as is and nothing is recorded.
func TestPullRefusalAndRuntimeError(t *testing.T) {
	f, rt := newPullFixture(t, nil)
	calls := 0
	_, err := f.gate.Pull(testContext(t), Request{Image: privRepo + ":v1", Auth: authB, Pod: tenantB}, pullAs(rt, privRepo+":v1", RuntimeImage{ID: imageIDA}, &calls))
	if !errors.Is(err, ErrRefused) || calls != 0 {
		t.Errorf("Pull = %v after %d pulls; want a refusal before any pull", err, calls)
	}
	f.verifier.allow(authA, privRepo, digest1)
	runtimeErr := errors.New("rpc error: code = NotFound desc = no such image")
	_, err = f.gate.Pull(testContext(t), Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA},
		func(context.Context) (string, error) { return "", runtimeErr })
	if err != runtimeErr {
		t.Errorf("Pull = %v; want the runtime's error as is", err)
	}
}

// A mirror-only name never admits content the node holds from a pull made
// with a pod's credential; content open to every pod, or unknown to the
// records, is admitted.
func TestPullMirrorOnlyKeepsPrivateContentOut(t *testing.T) {
	const mirrorOnly = "mirror.local:5000"
	image := mirrorOnly + "/bob/x:v1"
	for name, tc := range map[string]struct {
		creds *accessor.ImagePullCredentials
		want  error
	}{
		"held with tenant A's secret": {creds: (credential{kind: CredentialPod, hash: authKey(authA)}).records(tenantA), want: ErrPrivateContent},
		"held node-wide":              {creds: &accessor.ImagePullCredentials{NodePodsAccessible: true}},
		"unknown to the records":      {},
	} {
		t.Run(name, func(t *testing.T) {
			f, rt := newPullFixture(t, nil)
			f.gate.mirrorOnly[mirrorOnly] = struct{}{}
			if tc.creds != nil {
				f.gate.cfg.Records.RecordImagePulled(testContext(t), otherRepo+":v1", imageIDA, tc.creds)
			}
			img := RuntimeImage{ID: imageIDA, RepoDigests: []string{otherRepo + "@" + digest1, mirrorOnly + "/bob/x@" + digest1}}
			calls := 0
			_, err := f.gate.Pull(testContext(t), Request{Image: image, Pod: tenantB}, pullAs(rt, image, img, &calls))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Pull = %v; want admitted", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrRefused) {
				t.Fatalf("Pull = %v; want %v", err, tc.want)
			}
			names, _ := rt.removals()
			want := []string{mirrorOnly + "/bob/x:v1→" + imageIDA, mirrorOnly + "/bob/x@" + digest1 + "→" + imageIDA}
			if diff := cmp.Diff(want, names); diff != "" {
				t.Errorf("removed names (-want +got):\n%s", diff)
			}
		})
	}
}

// A gate with mirror-only registries needs the records' accessor.
func TestNewGateMirrorOnlyNeedsStore(t *testing.T) {
	f := newFixture(t, nil)
	cfg := f.gate.cfg
	cfg.MirrorOnly = []string{"mirror.local"}
	cfg.Store = nil
	if _, err := NewGate(cfg); !errors.Is(err, ErrMissingDependency) {
		t.Errorf("NewGate without Store = %v; want ErrMissingDependency", err)
	}
}

package pullmanager

import (
	"context"
	"errors"
	"testing"

	"github.com/pullrecords/pullrecords/accessor"
)

// With kubernetes#138175 protection on, a record without any credential
// mapping still marks the image as pulled by the kubelet: start-up recovery
// writes one for a pull the kubelet did not finish recording (possibly made
// with a secret), and RecordImagePulled with nil credentials writes one to
// mean "every pod must re-verify". Found in review: the first version of the
// option let a pod without credentials use such an image.
func TestPreloadedProtectionKeepsEmptyMappingRecordsPulled(t *testing.T) {
	ctx, logger := testCtx(t)
	const image, ref = "registry.example/private/app:1", "sha256:priv"
	noCreds := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) { return nil, nil, nil }

	t.Run("start-up recovery", func(t *testing.T) {
		store := newFaultyStore()
		if err := store.WriteImagePullIntent(logger, image); err != nil {
			t.Fatal(err)
		}
		images := &fakeImages{images: []Image{{ID: ref, RepoTags: []string{image}}}}
		m, err := NewImagePullManager(ctx, store.Accessor(), mustPolicy(t, NeverVerifyPreloadedImages), images, WithPreloadedImageProtection(true))
		if err != nil {
			t.Fatal(err)
		}
		if _, found, _ := store.GetImagePulledRecord(ref); !found {
			t.Fatal("start-up recovery wrote no record")
		}
		if must, err := m.MustAttemptImagePull(ctx, image, ref, noCreds); err != nil || !must {
			t.Errorf("after recovery: must pull = %v, %v; want true", must, err)
		}
	})
	t.Run("pull recorded without credentials", func(t *testing.T) {
		m, _ := newTestManager(t, newFaultyStore().Accessor(), mustPolicy(t, NeverVerifyPreloadedImages), WithPreloadedImageProtection(true))
		if err := m.RecordPullIntent(logger, image); err != nil {
			t.Fatal(err)
		}
		m.RecordImagePulled(ctx, image, ref, nil)
		if must, err := m.MustAttemptImagePull(ctx, image, ref, noCreds); err != nil || !must {
			t.Errorf("must pull = %v, %v; want true", must, err)
		}
	})
}

// PruneImagePulledRecord deletes a record only while the runtime still lacks
// the image, asked under the record's lock: a pull of the same content that
// finished meanwhile keeps its record.
func TestPruneImagePulledRecord(t *testing.T) {
	ctx, logger := testCtx(t)
	store := newFaultyStore()
	m, clk := newTestManager(t, store.Accessor(), mustPolicy(t, NeverVerifyPreloadedImages))
	for _, ref := range []string{"sha256:gone", "sha256:back"} {
		if err := store.WriteImagePulledRecord(logger, rec(ref, clk.Now(), map[string]accessor.ImagePullCredentials{"registry.example/a": {NodePodsAccessible: true}})); err != nil {
			t.Fatal(err)
		}
	}
	asked := 0
	answer := func(gone bool) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { asked++; return gone, nil }
	}
	if err := m.PruneImagePulledRecord(ctx, "sha256:gone", answer(true)); err != nil {
		t.Fatal(err)
	}
	if err := m.PruneImagePulledRecord(ctx, "sha256:back", answer(false)); err != nil {
		t.Fatal(err)
	}
	if err := m.PruneImagePulledRecord(ctx, "sha256:absent", answer(true)); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := store.GetImagePulledRecord("sha256:gone"); found {
		t.Error("record of a removed image was kept")
	}
	if _, found, _ := store.GetImagePulledRecord("sha256:back"); !found {
		t.Error("record of an image the runtime has again was deleted")
	}
	if asked != 2 {
		t.Errorf("runtime asked %d times, want 2 (not for a missing record)", asked)
	}
	boom := errors.New("runtime down")
	if err := m.PruneImagePulledRecord(ctx, "sha256:back", func(context.Context) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("runtime error: %v, want it returned", err)
	}
}

package pullmanager

import (
	"testing"
	"time"

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
		store := newFakeStore()
		if err := store.WriteImagePullIntent(logger, image); err != nil {
			t.Fatal(err)
		}
		images := &fakeImages{images: []Image{{ID: ref, RepoTags: []string{image}}}}
		m, err := NewImagePullManager(ctx, store, mustPolicy(t, NeverVerifyPreloadedImages), images, WithPreloadedImageProtection(true))
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
		m, _ := newTestManager(t, newFakeStore(), mustPolicy(t, NeverVerifyPreloadedImages), WithPreloadedImageProtection(true))
		if err := m.RecordPullIntent(logger, image); err != nil {
			t.Fatal(err)
		}
		m.RecordImagePulled(ctx, image, ref, nil)
		if must, err := m.MustAttemptImagePull(ctx, image, ref, noCreds); err != nil || !must {
			t.Errorf("must pull = %v, %v; want true", must, err)
		}
	})
}

// PruneImagePulledRecord deletes only a record older than until, under the
// record's lock: a record written since (a pull of the same content under
// another name while an image cache was removing the image) is kept.
func TestPruneImagePulledRecord(t *testing.T) {
	ctx, logger := testCtx(t)
	store := newFakeStore()
	m, clk := newTestManager(t, store, mustPolicy(t, NeverVerifyPreloadedImages))
	old := rec("sha256:old", clk.Now().Add(-time.Hour), map[string]accessor.ImagePullCredentials{"registry.example/a": {NodePodsAccessible: true}})
	if err := store.WriteImagePulledRecord(logger, old); err != nil {
		t.Fatal(err)
	}
	until := accessor.StorageTime(clk.Now()).Time
	if err := m.RecordPullIntent(logger, "registry.example/b:1"); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(ctx, "registry.example/b:1", "sha256:fresh", &accessor.ImagePullCredentials{
		KubernetesSecrets: []accessor.ImagePullSecret{secret("u", "b", "s", "h")}})
	for _, ref := range []string{"sha256:old", "sha256:fresh", "sha256:absent"} {
		if err := m.PruneImagePulledRecord(ctx, ref, until); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
	}
	if _, found, _ := store.GetImagePulledRecord("sha256:old"); found {
		t.Error("record older than until was kept")
	}
	if _, found, _ := store.GetImagePulledRecord("sha256:fresh"); !found {
		t.Error("record written at until was deleted")
	}
}

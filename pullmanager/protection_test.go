package pullmanager

import (
	"testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// The kubernetes#138175 protection decides "pulled by the kubelet" per
// mapping key. These tests try to make it answer "no pull needed" to a pod
// without credentials for content the kubelet pulled under the requested
// name, through every path that records a pull without usable credentials.
const (
	protX = "registry.example/a/x:1" // the name the kubelet pulled
	protY = "registry.example/b/y:1" // the same content, pulled with B's secret
	protR = "sha256:protected"
)

var protSecretB = secret("uid-b", "b", "pull", "hash-b")

func protRecordY() *accessor.ImagePulledRecord {
	return rec(protR, t0, map[string]accessor.ImagePullCredentials{
		"registry.example/b/y": {KubernetesSecrets: []accessor.ImagePullSecret{protSecretB}},
	})
}

// mustPullWithout asserts that a pod without credentials must pull image.
func mustPullWithout(t *testing.T, m *PullManager, image string) {
	t.Helper()
	ctx, _ := testCtx(t)
	calls := 0
	got, err := m.MustAttemptImagePull(ctx, image, protR, podCreds(&calls, nil, nil, nil))
	if err != nil || !got {
		t.Fatalf("MustAttemptImagePull(%q) for a pod without credentials = (%v, %v), want (true, nil)", image, got, err)
	}
}

// Start-up recovery of a leftover intent for X over a record that maps only
// Y: the kubelet did pull X, so X must not look preloaded.
func TestProtectionRecoveryOverRecordOfAnotherName(t *testing.T) {
	store := newFaultyStore()
	putRecords(t, store, protRecordY())
	putIntents(t, store, protX)
	images := &fakeImages{images: []imageruntime.Image{{ID: protR, RepoTags: []string{protX, protY}}}}
	m := newTestManagerWithImages(t, store.Accessor(), images, WithPreloadedImageProtection(true))
	if hasIntent(t, store, protX) {
		t.Fatal("the leftover intent was not recovered")
	}
	mustPullWithout(t, m, protX)
	// B's pod still may use Y with its secret.
	ctx, _ := testCtx(t)
	calls := 0
	if got, err := m.MustAttemptImagePull(ctx, protY, protR, podCreds(&calls, []accessor.ImagePullSecret{protSecretB}, nil, nil)); err != nil || got {
		t.Errorf("B's pod with its secret: (%v, %v), want (false, nil)", got, err)
	}
}

// A pull recorded without credentials over a record of another name.
func TestProtectionNilCredentialsOverRecordOfAnotherName(t *testing.T) {
	store := newFaultyStore()
	putRecords(t, store, protRecordY())
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, NeverVerifyPreloadedImages), WithPreloadedImageProtection(true))
	ctx, logger := testCtx(t)
	if err := m.RecordPullIntent(logger, protX); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(ctx, protX, protR, nil)
	if hasIntent(t, store, protX) {
		t.Fatal("intent left after the pull was recorded")
	}
	mustPullWithout(t, m, protX)
}

// A record created by recovery (no record yet) that later gains another
// name through a credentialed pull.
func TestProtectionRecoveredRecordThenOtherName(t *testing.T) {
	store := newFaultyStore()
	putIntents(t, store, protX)
	images := &fakeImages{images: []imageruntime.Image{{ID: protR, RepoTags: []string{protX}}}}
	m := newTestManagerWithImages(t, store.Accessor(), images, WithPreloadedImageProtection(true))
	ctx, logger := testCtx(t)
	if err := m.RecordPullIntent(logger, protY); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(ctx, protY, protR, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{protSecretB}})
	mustPullWithout(t, m, protX)
	mustPullWithout(t, m, protY)
}

// Without the protection nothing changes: the kubelet's merge ignores nil
// credentials for an existing record, and the record alone makes every
// name count as pulled.
func TestNoProtectionKeepsUpstreamMerge(t *testing.T) {
	store := newFaultyStore()
	putRecords(t, store, protRecordY())
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, NeverVerifyPreloadedImages))
	ctx, logger := testCtx(t)
	if err := m.RecordPullIntent(logger, protX); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(ctx, protX, protR, nil)
	got := storedRecord(t, store, protR)
	if _, ok := got.CredentialMapping["registry.example/a/x"]; ok || len(got.CredentialMapping) != 1 {
		t.Errorf("mapping = %v, want only the entry of registry.example/b/y", got.CredentialMapping)
	}
	mustPullWithout(t, m, protX)
}

// newTestManagerWithImages is newTestManager with a runtime image list for
// start-up recovery and the default policy.
func newTestManagerWithImages(t *testing.T, store accessor.PullRecordsAccessor, images imageruntime.ImageLister, opts ...Option) *PullManager {
	t.Helper()
	ctx, _ := testCtx(t)
	m, err := NewImagePullManager(ctx, store, mustPolicy(t, NeverVerifyPreloadedImages), images, opts...)
	if err != nil {
		t.Fatalf("NewImagePullManager: %v", err)
	}
	return m
}

// With kubernetes#138175 protection on, a record without any credential
// mapping still marks the image as pulled by the kubelet: start-up recovery
// writes one for a pull the kubelet did not finish recording (possibly made
// with a secret), and RecordImagePulled with nil credentials writes one to
// mean "every pod must re-verify". Neither may let a pod without
// credentials use the image.
func TestPreloadedProtectionKeepsEmptyMappingRecordsPulled(t *testing.T) {
	ctx, logger := testCtx(t)
	const image, ref = "registry.example/private/app:1", "sha256:priv"
	noCreds := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) { return nil, nil, nil }

	t.Run("start-up recovery", func(t *testing.T) {
		store := newFaultyStore()
		if err := store.WriteImagePullIntent(logger, image); err != nil {
			t.Fatal(err)
		}
		images := &fakeImages{images: []imageruntime.Image{{ID: ref, RepoTags: []string{image}}}}
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

package pullmanager

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// TestStartupRecovery covers start-up recovery (upstream
// image_pull_manager.go, initialize) in both modes: as the kubelet, an
// intent must equal a runtime tag or digest reference exactly, so "busybox"
// stays; with WithNormalizedImageNames both sides are normalised first and
// it is recovered.
func TestStartupRecovery(t *testing.T) {
	const digest = "sha256:0123456789012345678901234567890123456789012345678901234567890123"
	tests := []struct {
		name       string
		normalized bool
		left       []string // intents left
		recovered  []string // image IDs given an empty record
	}{
		{name: "upstream", left: []string{"Bad:Name", "busybox", "never-pulled:1", "quay.example/x/y:1@" + digest, "with-record"},
			recovered: []string{"sha256:nginx", "sha256:app"}},
		{name: "normalised names", normalized: true, left: []string{"Bad:Name", "never-pulled:1"},
			recovered: []string{"sha256:busybox", "sha256:nginx", "sha256:app", "sha256:y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newFaultyStore()
			for _, img := range []string{
				"busybox",                             // equals no runtime reference; its normalised form does
				"docker.io/library/nginx:1.27",        // exact tag
				"registry.example/team/app@" + digest, // exact digest reference
				"quay.example/x/y:1@" + digest,        // tag+digest: only its normalised digest form matches
				"never-pulled:1",                      // matches nothing: stays
				"Bad:Name",                            // unparsable, matches nothing: stays
				"with-record",                         // existing record is left unchanged
			} {
				putIntents(t, store, img)
			}
			existing := rec("sha256:rec", t0, map[string]accessor.ImagePullCredentials{"docker.io/library/with-record": {NodePodsAccessible: true}})
			putRecords(t, store, existing)
			images := &fakeImages{images: []imageruntime.Image{
				{ID: "sha256:busybox", RepoTags: []string{"docker.io/library/busybox:latest"}},
				{ID: "sha256:nginx", RepoTags: []string{"docker.io/library/nginx:1.27"}},
				{ID: "sha256:app", RepoDigests: []string{"registry.example/team/app@" + digest}},
				{ID: "sha256:y", RepoDigests: []string{"quay.example/x/y@" + digest}},
				{ID: "sha256:rec", RepoTags: []string{"docker.io/library/with-record:latest"}},
			}}
			ctx, _ := testCtx(t)
			metrics := NewMetrics()
			m, err := NewImagePullManager(ctx, store.Accessor(), mustPolicy(t, AlwaysVerify), images, WithMetrics(metrics), WithNormalizedImageNames(tc.normalized))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.left, storedIntents(t, store), cmpSorted); diff != "" {
				t.Errorf("intents left (-want +got):\n%s", diff)
			}
			for _, id := range tc.recovered {
				r := storedRecord(t, store, id)
				if r == nil {
					t.Errorf("no record for %s", id)
					continue
				}
				if len(r.CredentialMapping) != 0 {
					t.Errorf("record %s has credentials %v, want an empty mapping", id, r.CredentialMapping)
				}
			}
			if got, want := len(storedRefs(t, store.Inner())), len(tc.recovered)+1; got != want {
				t.Errorf("%d records, want %d", got, want)
			}
			if diff := cmp.Diff(existing.ForStorage(), storedRecord(t, store, "sha256:rec")); diff != "" {
				t.Errorf("existing record changed (-want +got):\n%s", diff)
			}
			if m.intents.get("busybox") != 0 {
				t.Error("counters must not be rebuilt")
			}
			if got := counterValue(metrics.intents); got != float64(len(tc.left)) {
				t.Errorf("intent gauge = %v, want %d", got, len(tc.left))
			}
			if got := counterValue(metrics.records); got != float64(len(tc.recovered)+1) {
				t.Errorf("record gauge = %v, want %d", got, len(tc.recovered)+1)
			}
		})
	}
}

// TestStartupRecoveryErrors: a list error keeps what could be read, a
// runtime error matches nothing, and a record write failure keeps the intent.
func TestStartupRecoveryErrors(t *testing.T) {
	ctx, _ := testCtx(t)
	img := &fakeImages{images: []imageruntime.Image{{ID: "sha256:b", RepoTags: []string{"docker.io/library/busybox:latest"}}}}

	const busybox = "docker.io/library/busybox:latest"
	store := newFaultyStore()
	putIntents(t, store, busybox)
	if _, err := NewImagePullManager(ctx, store.Accessor(), mustPolicy(t, AlwaysVerify), &fakeImages{err: errInjected}); err != nil {
		t.Fatal(err)
	}
	if !hasIntent(t, store, busybox) {
		t.Error("runtime list error: intent removed")
	}

	setFail(store, "WriteImagePulledRecord", errInjected)
	if _, err := NewImagePullManager(ctx, store.Accessor(), mustPolicy(t, AlwaysVerify), img); err != nil {
		t.Fatal(err)
	}
	if !hasIntent(t, store, busybox) {
		t.Error("record write failed: intent removed")
	}
	setFail(store, "WriteImagePulledRecord", nil)

	setFail(store, "DeleteImagePullIntent", errInjected)
	if _, err := NewImagePullManager(ctx, store.Accessor(), mustPolicy(t, AlwaysVerify), img); err != nil {
		t.Fatal(err)
	}
	if storedRecord(t, store, "sha256:b") == nil || !hasIntent(t, store, busybox) {
		t.Error("delete failure: want record written and intent kept")
	}
	setFail(store, "DeleteImagePullIntent", nil)

	setFail(store, "ListImagePullIntents", errInjected)
	if _, err := NewImagePullManager(ctx, store.Accessor(), mustPolicy(t, AlwaysVerify), img); err != nil {
		t.Fatal(err)
	}

	if _, err := NewImagePullManager(ctx, nil, mustPolicy(t, AlwaysVerify), img); !errors.Is(err, ErrMissingDependency) {
		t.Errorf("nil store: %v", err)
	}
	if _, err := NewImagePullManager(ctx, store.Accessor(), nil, img); !errors.Is(err, ErrMissingDependency) {
		t.Errorf("nil policy: %v", err)
	}
}

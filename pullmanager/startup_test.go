package pullmanager

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

// TestStartupRecovery covers facts §4.7 with normalised matching (the
// upstream kubelet leaks intents such as "busybox", facts §11.3).
func TestStartupRecovery(t *testing.T) {
	const digest = "sha256:0123456789012345678901234567890123456789012345678901234567890123"
	store := newFakeStore()
	for _, img := range []string{
		"busybox",                             // matches a normalised tag (upstream: leaked)
		"docker.io/library/nginx:1.27",        // exact tag (upstream matches too)
		"registry.example/team/app@" + digest, // digest
		"quay.example/x/y:1@" + digest,        // tag+digest matches the digest form
		"never-pulled:1",                      // matches nothing: stays
		"Bad:Name",                            // unparsable, matches nothing: stays
		"with-record",                         // existing record is left unchanged
	} {
		store.intents[img] = true
	}
	existing := rec("sha256:rec", t0, map[string]accessor.ImagePullCredentials{"docker.io/library/with-record": {NodePodsAccessible: true}})
	store.records["sha256:rec"] = existing.ForStorage()
	images := &fakeImages{images: []Image{
		{ID: "sha256:busybox", RepoTags: []string{"docker.io/library/busybox:latest"}},
		{ID: "sha256:nginx", RepoTags: []string{"docker.io/library/nginx:1.27"}},
		{ID: "sha256:app", RepoDigests: []string{"registry.example/team/app@" + digest}},
		{ID: "sha256:y", RepoDigests: []string{"quay.example/x/y@" + digest}},
		{ID: "sha256:rec", RepoTags: []string{"docker.io/library/with-record:latest"}},
	}}
	ctx, _ := testCtx(t)
	metrics := NewMetrics()
	m, err := NewImagePullManager(ctx, store, mustPolicy(t, AlwaysVerify), images, WithMetrics(metrics))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for img := range store.intents {
		left = append(left, img)
	}
	if diff := cmp.Diff([]string{"Bad:Name", "never-pulled:1"}, left, cmpSorted); diff != "" {
		t.Errorf("intents left (-want +got):\n%s", diff)
	}
	for _, id := range []string{"sha256:busybox", "sha256:nginx", "sha256:app", "sha256:y"} {
		r := store.record(id)
		if r == nil {
			t.Errorf("no record for %s", id)
			continue
		}
		if len(r.CredentialMapping) != 0 {
			t.Errorf("record %s has credentials %v, want an empty mapping", id, r.CredentialMapping)
		}
	}
	if diff := cmp.Diff(existing.ForStorage(), store.record("sha256:rec")); diff != "" {
		t.Errorf("existing record changed (-want +got):\n%s", diff)
	}
	if m.intents.get("busybox") != 0 {
		t.Error("counters must not be rebuilt")
	}
	if got := counterValue(metrics.intents); got != 2 {
		t.Errorf("intent gauge = %v, want 2", got)
	}
	if got := counterValue(metrics.records); got != 5 {
		t.Errorf("record gauge = %v, want 5", got)
	}
}

// TestStartupRecoveryErrors: a list error keeps what could be read, a
// runtime error matches nothing, and a record write failure keeps the intent.
func TestStartupRecoveryErrors(t *testing.T) {
	ctx, _ := testCtx(t)
	img := &fakeImages{images: []Image{{ID: "sha256:b", RepoTags: []string{"docker.io/library/busybox:latest"}}}}

	store := newFakeStore()
	store.intents["busybox"] = true
	if _, err := NewImagePullManager(ctx, store, mustPolicy(t, AlwaysVerify), &fakeImages{err: errInjected}); err != nil {
		t.Fatal(err)
	}
	if !store.hasIntent("busybox") {
		t.Error("runtime list error: intent removed")
	}

	store.setFail("WriteImagePulledRecord", errInjected)
	if _, err := NewImagePullManager(ctx, store, mustPolicy(t, AlwaysVerify), img); err != nil {
		t.Fatal(err)
	}
	if !store.hasIntent("busybox") {
		t.Error("record write failed: intent removed")
	}
	store.setFail("WriteImagePulledRecord", nil)

	store.setFail("DeleteImagePullIntent", errInjected)
	if _, err := NewImagePullManager(ctx, store, mustPolicy(t, AlwaysVerify), img); err != nil {
		t.Fatal(err)
	}
	if store.record("sha256:b") == nil || !store.hasIntent("busybox") {
		t.Error("delete failure: want record written and intent kept")
	}
	store.setFail("DeleteImagePullIntent", nil)

	store.setFail("ListImagePullIntents", errInjected)
	if _, err := NewImagePullManager(ctx, store, mustPolicy(t, AlwaysVerify), img); err != nil {
		t.Fatal(err)
	}

	if _, err := NewImagePullManager(ctx, nil, mustPolicy(t, AlwaysVerify), img); !errors.Is(err, ErrMissingDependency) {
		t.Errorf("nil store: %v", err)
	}
	if _, err := NewImagePullManager(ctx, store, nil, img); !errors.Is(err, ErrMissingDependency) {
		t.Errorf("nil policy: %v", err)
	}
}

package pullmanager

import (
	"errors"
	"testing"

	"github.com/pullrecords/pullrecords/accessor"
)

// TestIntentRefCounting covers the kubelet's intent counting
// (pkg/kubelet/images/pullmanager/image_pull_manager.go: RecordPullIntent
// counts per image string; decrementImagePullIntent deletes the intent when
// the last pull of that string ends).
func TestIntentRefCounting(t *testing.T) {
	ctx, logger := testCtx(t)
	store := newFaultyStore()
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify))

	// Two concurrent pulls of the same string: the intent stays until the last ends.
	for range 2 {
		if err := m.RecordPullIntent(logger, imgX); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.intents.get(imgX); got != 2 {
		t.Fatalf("count = %d, want 2", got)
	}
	m.RecordImagePullFailed(ctx, imgX)
	if !hasIntent(t, store, imgX) || m.intents.get(imgX) != 1 {
		t.Fatalf("after one failure: intent %v count %d, want kept with count 1", hasIntent(t, store, imgX), m.intents.get(imgX))
	}
	m.RecordImagePulled(ctx, imgX, refA, nil)
	if hasIntent(t, store, imgX) || m.intents.get(imgX) != 0 {
		t.Fatalf("after the last pull ended: intent %v count %d", hasIntent(t, store, imgX), m.intents.get(imgX))
	}

	// A failed intent write is returned and not counted.
	setFail(store, "WriteImagePullIntent", errInjected)
	if err := m.RecordPullIntent(logger, imgY); !errors.Is(err, errInjected) {
		t.Fatalf("RecordPullIntent error = %v, want the store's", err)
	}
	if m.intents.get(imgY) != 0 {
		t.Fatal("a failed intent write was counted")
	}
	setFail(store, "WriteImagePullIntent", nil)

	// The intent (file and count) is kept when the record cannot be written.
	if err := m.RecordPullIntent(logger, imgY); err != nil {
		t.Fatal(err)
	}
	setFail(store, "WriteImagePulledRecord", errInjected)
	m.RecordImagePulled(ctx, imgY, refA, &accessor.ImagePullCredentials{NodePodsAccessible: true})
	if !hasIntent(t, store, imgY) || m.intents.get(imgY) != 1 {
		t.Fatalf("record write failed: intent %v count %d, want both kept", hasIntent(t, store, imgY), m.intents.get(imgY))
	}
	setFail(store, "WriteImagePulledRecord", nil)

	// A failed intent delete keeps the count as it is.
	setFail(store, "DeleteImagePullIntent", errInjected)
	m.RecordImagePullFailed(ctx, imgY)
	if !hasIntent(t, store, imgY) || m.intents.get(imgY) != 1 {
		t.Fatalf("delete failed: intent %v count %d, want both kept", hasIntent(t, store, imgY), m.intents.get(imgY))
	}
	setFail(store, "DeleteImagePullIntent", nil)
	m.RecordImagePullFailed(ctx, imgY)
	if hasIntent(t, store, imgY) {
		t.Fatal("intent not deleted")
	}

	// A stored intent with count 0 (left by an earlier process) is deleted by
	// the first end of a pull.
	putIntents(t, store, "leftover")
	m.RecordImagePullFailed(ctx, "leftover")
	if hasIntent(t, store, "leftover") {
		t.Fatal("leftover intent not deleted")
	}

	// The intent is always rewritten, even if it exists.
	before := store.CallCount("WriteImagePullIntent")
	putIntents(t, store, imgX)
	if err := m.RecordPullIntent(logger, imgX); err != nil {
		t.Fatal(err)
	}
	if store.CallCount("WriteImagePullIntent") != before+1 {
		t.Error("existing intent was not rewritten")
	}
}

package pullmanager

import (
	"errors"
	"testing"

	"github.com/pullrecords/pullrecords/accessor"
)

// TestIntentRefCounting covers facts §4.3 and §4.4 step 2.
func TestIntentRefCounting(t *testing.T) {
	ctx, logger := testCtx(t)
	store := newFakeStore()
	m, _ := newTestManager(t, store, mustPolicy(t, AlwaysVerify))

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
	if !store.hasIntent(imgX) || m.intents.get(imgX) != 1 {
		t.Fatalf("after one failure: intent %v count %d, want kept with count 1", store.hasIntent(imgX), m.intents.get(imgX))
	}
	m.RecordImagePulled(ctx, imgX, refA, nil)
	if store.hasIntent(imgX) || m.intents.get(imgX) != 0 {
		t.Fatalf("after the last pull ended: intent %v count %d", store.hasIntent(imgX), m.intents.get(imgX))
	}

	// A failed intent write is returned and not counted.
	store.setFail("WriteImagePullIntent", errInjected)
	if err := m.RecordPullIntent(logger, imgY); !errors.Is(err, errInjected) {
		t.Fatalf("RecordPullIntent error = %v, want the store's", err)
	}
	if m.intents.get(imgY) != 0 {
		t.Fatal("a failed intent write was counted")
	}
	store.setFail("WriteImagePullIntent", nil)

	// The intent (file and count) is kept when the record cannot be written.
	if err := m.RecordPullIntent(logger, imgY); err != nil {
		t.Fatal(err)
	}
	store.setFail("WriteImagePulledRecord", errInjected)
	m.RecordImagePulled(ctx, imgY, refA, &accessor.ImagePullCredentials{NodePodsAccessible: true})
	if !store.hasIntent(imgY) || m.intents.get(imgY) != 1 {
		t.Fatalf("record write failed: intent %v count %d, want both kept", store.hasIntent(imgY), m.intents.get(imgY))
	}
	store.setFail("WriteImagePulledRecord", nil)

	// A failed intent delete keeps the count as it is.
	store.setFail("DeleteImagePullIntent", errInjected)
	m.RecordImagePullFailed(ctx, imgY)
	if !store.hasIntent(imgY) || m.intents.get(imgY) != 1 {
		t.Fatalf("delete failed: intent %v count %d, want both kept", store.hasIntent(imgY), m.intents.get(imgY))
	}
	store.setFail("DeleteImagePullIntent", nil)
	m.RecordImagePullFailed(ctx, imgY)
	if store.hasIntent(imgY) {
		t.Fatal("intent not deleted")
	}

	// A stored intent with count 0 (left by an earlier process) is deleted by
	// the first end of a pull.
	store.intents["leftover"] = true
	m.RecordImagePullFailed(ctx, "leftover")
	if store.hasIntent("leftover") {
		t.Fatal("leftover intent not deleted")
	}

	// The intent is always rewritten, even if it exists.
	before := store.callCount("WriteImagePullIntent")
	store.intents[imgX] = true
	if err := m.RecordPullIntent(logger, imgX); err != nil {
		t.Fatal(err)
	}
	if store.callCount("WriteImagePullIntent") != before+1 {
		t.Error("existing intent was not rewritten")
	}
}

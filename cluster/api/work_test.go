package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The Outcome embedded in a NodeResult is flat on the wire, as the CRD
// declares it (status, reason, message beside cache and image), through
// both encoders the project uses.
func TestNodeResultOutcomeIsFlat(t *testing.T) {
	r := NodeResult{Cache: "ns/c", CacheUID: "u", Image: "a:1", Batch: "1-x", Work: WorkRefresh,
		Outcome: Outcome{Status: WorkFailed, Reason: "ErrImagePull", Message: "401"},
		Time:    metav1.NewTime(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))}
	want := map[string]any{"cache": "ns/c", "cacheUID": "u", "image": "a:1", "batch": "1-x", "work": "refresh",
		"status": "failed", "reason": "ErrImagePull", "message": "401", "time": "2026-12-02T09:00:00Z"}

	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var viaJSON map[string]any
	if err := json.Unmarshal(b, &viaJSON); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, viaJSON); d != "" {
		t.Errorf("encoding/json (-want +got):\n%s", d)
	}

	ni := NodeImages{Status: NodeImagesStatus{Results: []NodeResult{r}}}
	u, err := ToUnstructured(&ni)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := unstructured.NestedSlice(u.Object, "status", "results")
	if err != nil || len(got) != 1 {
		t.Fatalf("results %v, %v", got, err)
	}
	if d := cmp.Diff(want, got[0]); d != "" {
		t.Errorf("unstructured (-want +got):\n%s", d)
	}
	var back NodeImages
	if err := FromUnstructured(u, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r, back.Status.Results[0]); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}

func TestWorkTypeForAndFinal(t *testing.T) {
	for reason, want := range map[string]WorkType{
		ReasonImageCacheCreate: WorkCreate, ReasonImageCacheUpdate: WorkUpdate, ReasonImageCacheRefresh: WorkRefresh,
		ReasonImageCachePurge: WorkPurge, ReasonImageCacheDelete: WorkDelete, ReasonCacheSpecValidationFailed: WorkCreate,
	} {
		if got := WorkTypeFor(reason); got != want {
			t.Errorf("WorkTypeFor(%s) = %s, want %s", reason, got, want)
		}
	}
	for s, want := range map[WorkStatus]bool{WorkSucceeded: true, WorkFailed: true, WorkAlreadyPulled: true, WorkUnknown: true, WorkJobCreated: false, "": false} {
		if got := (Outcome{Status: s}).Final(); got != want {
			t.Errorf("Final(%q) = %v", s, got)
		}
	}
}

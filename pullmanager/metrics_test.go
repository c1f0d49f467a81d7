package pullmanager

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pullrecords/pullrecords/accessor"
)

// TestMetricNames checks the kubelet's metric names plus the new ones, and
// that nothing needs a global registry.
func TestMetricNames(t *testing.T) {
	metrics := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range metrics.Collectors() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	ctx, _ := testCtx(t)
	m, _ := newTestManager(t, newFakeStore(), mustPolicy(t, AlwaysVerify), WithMetrics(metrics))
	if _, err := m.MustAttemptImagePull(ctx, imgX, refA, nil); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	want := []string{
		"kubelet_imagemanager_image_mustpull_check_duration_seconds",
		"kubelet_imagemanager_image_mustpull_checks_total",
		"kubelet_imagemanager_image_mustpull_record_lookups_total",
		"kubelet_imagemanager_image_name_cache_lookups_total",
		"kubelet_imagemanager_ondisk_pulledrecords",
		"kubelet_imagemanager_ondisk_pullintents",
	}
	if diff := cmp.Diff(want, names, cmpSorted); diff != "" {
		t.Errorf("metric names (-want +got):\n%s", diff)
	}
}

func TestMetricValues(t *testing.T) {
	ctx, logger := testCtx(t)
	metrics := NewMetrics()
	store := newFakeStore()
	m, _ := newTestManager(t, store, mustPolicy(t, AlwaysVerify), WithMetrics(metrics))

	// Writing the same intent twice does not raise the stored-intent gauge.
	for range 2 {
		if err := m.RecordPullIntent(logger, imgX); err != nil {
			t.Fatal(err)
		}
	}
	if got := counterValue(metrics.intents); got != 1 {
		t.Errorf("intent gauge = %v, want 1", got)
	}
	m.RecordImagePulled(ctx, imgX, refA, &accessor.ImagePullCredentials{NodePodsAccessible: true})
	m.RecordImagePullFailed(ctx, imgX)
	if got := counterValue(metrics.intents); got != 0 {
		t.Errorf("intent gauge = %v, want 0", got)
	}
	if got := counterValue(metrics.records); got != 1 {
		t.Errorf("record gauge = %v, want 1", got)
	}

	// No metric for an absent image; one per check otherwise.
	_, _ = m.MustAttemptImagePull(ctx, imgX, "", nil)
	_, _ = m.MustAttemptImagePull(ctx, imgX, refA, nil)
	_, _ = m.MustAttemptImagePull(ctx, imgX, refA, nil)
	_, _ = m.MustAttemptImagePull(ctx, imgX, "sha256:none", nil)
	if diff := cmp.Diff(map[string]float64{ResultCredentialRecordFound: 2, ResultMustAuthenticate: 1}, checkCounts(metrics)); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	if got := counterValue(metrics.duration); got != 3 {
		t.Errorf("latency samples = %v, want 3", got)
	}
	if h, miss := counterValue(metrics.recordHit), counterValue(metrics.recordMiss); h != 2 || miss != 1 {
		t.Errorf("record lookups hit %v miss %v, want 2 and 1", h, miss)
	}
	if h, miss := counterValue(metrics.nameHit), counterValue(metrics.nameMiss); h+miss != 2 || h < 1 {
		t.Errorf("name lookups hit %v miss %v, want 2 with at least one hit", h, miss)
	}
}

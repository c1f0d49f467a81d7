package pullmanager

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pullrecords/pullrecords/accessor"
)

// TestMetricNames checks the kubelet's metric names plus the new ones, and
// that nothing needs a global registry. Names come from the descriptors:
// labelled series only appear once used (TestLazySeries).
func TestMetricNames(t *testing.T) {
	metrics := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range metrics.Collectors() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	ctx, _ := testCtx(t)
	m, _ := newTestManager(t, newFaultyStore().Accessor(), mustPolicy(t, AlwaysVerify), WithMetrics(metrics))
	if _, err := m.MustAttemptImagePull(ctx, imgX, refA, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range metrics.Collectors() {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		d := (<-ch).String()
		_, rest, _ := strings.Cut(d, `fqName: "`)
		name, _, _ := strings.Cut(rest, `"`)
		names = append(names, name)
	}
	want := []string{
		"kubelet_imagemanager_image_mustpull_check_duration_seconds",
		"kubelet_imagemanager_inmemory_pulledrecords_usage_percent",
		"kubelet_imagemanager_inmemory_pullintents_usage_percent",
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
	store := newFaultyStore()
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify), WithMetrics(metrics))

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
	// Upstream mapping keys need no name cache, so none is counted; the
	// opt-in normalised mode caches names and counts its lookups.
	if h, miss := counterValue(metrics.nameHit), counterValue(metrics.nameMiss); h+miss != 0 {
		t.Errorf("name lookups hit %v miss %v without a name cache, want none", h, miss)
	}
	normalized := NewMetrics()
	nstore := newFaultyStore()
	n, _ := newTestManager(t, nstore.Accessor(), mustPolicy(t, AlwaysVerify), WithMetrics(normalized), WithNormalizedImageNames(true))
	n.RecordImagePulled(ctx, imgX, refA, &accessor.ImagePullCredentials{NodePodsAccessible: true})
	_, _ = n.MustAttemptImagePull(ctx, imgX, refA, nil)
	_, _ = n.MustAttemptImagePull(ctx, imgX, refA, nil)
	if h, miss := counterValue(normalized.nameHit), counterValue(normalized.nameMiss); h+miss != 2 || h < 1 {
		t.Errorf("normalised mode: name lookups hit %v miss %v, want 2 with at least one hit", h, miss)
	}
}

// TestKubeletMetricExposition pins the exposition of the kubelet's five
// metrics: names, types and HELP texts as a v1.37.2 kubelet shows them
// (component-base adds the "[ALPHA] " prefix). The kubeletadapter module
// checks the same against upstream's real collectors.
func TestKubeletMetricExposition(t *testing.T) {
	ctx, logger := testCtx(t)
	metrics := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.KubeletCollectors()...)
	m, _ := newTestManager(t, newFaultyStore().Accessor(), mustPolicy(t, AlwaysVerify), WithMetrics(metrics))

	// Before any check the counter has no series at all, as in the kubelet.
	const gauges = `# HELP kubelet_imagemanager_inmemory_pulledrecords_usage_percent [ALPHA] The ImagePulledRecords in-memory cache usage in percent.
# TYPE kubelet_imagemanager_inmemory_pulledrecords_usage_percent gauge
kubelet_imagemanager_inmemory_pulledrecords_usage_percent 0
# HELP kubelet_imagemanager_inmemory_pullintents_usage_percent [ALPHA] The ImagePullIntents in-memory cache usage in percent.
# TYPE kubelet_imagemanager_inmemory_pullintents_usage_percent gauge
kubelet_imagemanager_inmemory_pullintents_usage_percent 0
# HELP kubelet_imagemanager_ondisk_pulledrecords [ALPHA] Number of ImagePulledRecords stored on disk.
# TYPE kubelet_imagemanager_ondisk_pulledrecords gauge
kubelet_imagemanager_ondisk_pulledrecords %d
# HELP kubelet_imagemanager_ondisk_pullintents [ALPHA] Number of ImagePullIntents stored on disk.
# TYPE kubelet_imagemanager_ondisk_pullintents gauge
kubelet_imagemanager_ondisk_pullintents 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(sprintf(gauges, 0))); err != nil {
		t.Fatal(err)
	}
	if err := m.RecordPullIntent(logger, imgX); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(ctx, imgX, refA, &accessor.ImagePullCredentials{NodePodsAccessible: true})
	_, _ = m.MustAttemptImagePull(ctx, imgX, refA, nil)
	_, _ = m.MustAttemptImagePull(ctx, imgX, refA, nil)
	const checks = `# HELP kubelet_imagemanager_image_mustpull_checks_total [ALPHA] Counter for how many times kubelet checked whether credentials need to be re-verified to access an image
# TYPE kubelet_imagemanager_image_mustpull_checks_total counter
kubelet_imagemanager_image_mustpull_checks_total{result="credentialRecordFound"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(checks+sprintf(gauges, 1))); err != nil {
		t.Fatal(err)
	}
}

// TestLazySeries: no labelled series exists before its first use, and one
// use creates only that series.
func TestLazySeries(t *testing.T) {
	metrics := NewMetrics()
	for _, name := range []string{MetricMustPullChecksTotal, metricMustPullRecordLookupsTotal, metricImageNameCacheLookupsTotal} {
		if n := testutil.CollectAndCount(collectorByName(t, metrics, name)); n != 0 {
			t.Errorf("%s has %d series before any use, want 0", name, n)
		}
	}
	if got := counterValue(metrics.checkByCode[resultRecordFound]); got != 0 {
		t.Errorf("unused series reads %v, want 0", got)
	}
	if metrics.checkByCode[resultRecordFound].created() {
		t.Error("reading a series created it")
	}
	metrics.observeCheck(resultMustAuthenticate, 0)
	metrics.recordLookup(false)
	for name, want := range map[string]int{MetricMustPullChecksTotal: 1, metricMustPullRecordLookupsTotal: 1, metricImageNameCacheLookupsTotal: 0} {
		if n := testutil.CollectAndCount(collectorByName(t, metrics, name)); n != want {
			t.Errorf("%s has %d series, want %d", name, n, want)
		}
	}
	if got := counterValue(metrics.checkByCode[resultMustAuthenticate]); got != 1 {
		t.Errorf("used series reads %v, want 1", got)
	}
}

func TestUsagePercent(t *testing.T) {
	_, logger := testCtx(t)
	metrics := NewMetrics()
	store := newFaultyStore()
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify), WithMetrics(metrics))
	for _, img := range []string{"a:1", "b:1", "c:1"} {
		if err := m.RecordPullIntent(logger, img); err != nil {
			t.Fatal(err)
		}
	}
	if got := counterValue(metrics.intentsUsage); got != 0 {
		t.Errorf("unbounded intent usage = %v, want 0", got)
	}
	// The kubelet's formula: whole percent, integer division.
	metrics.SetNominalCacheSizes(7, 0)
	if err := m.RecordPullIntent(logger, "d:1"); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(metrics.intentsUsage); got != 57 { // 4*100/7
		t.Errorf("intent usage = %v, want 57", got)
	}
	if got := counterValue(metrics.recordsUsage); got != 0 {
		t.Errorf("record usage with size 0 = %v, want 0", got)
	}
	// Five intents against a nominal size of 2: the kubelet's cache would
	// be full (its gauge cannot pass 100), so the gauge reads 100, not 250.
	metrics.SetNominalCacheSizes(2, 0)
	if err := m.RecordPullIntent(logger, "e:1"); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(metrics.intentsUsage); got != 100 {
		t.Errorf("intent usage = %v, want 100 (capped)", got)
	}
}

func collectorByName(t *testing.T, m *Metrics, name string) prometheus.Collector {
	t.Helper()
	for _, c := range m.Collectors() {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		if strings.Contains((<-ch).String(), `"`+name+`"`) {
			return c
		}
	}
	t.Fatalf("no collector %s", name)
	return nil
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

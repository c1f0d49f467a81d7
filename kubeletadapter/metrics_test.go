package kubeletadapter_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2/ktesting"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	upstream "k8s.io/kubernetes/pkg/kubelet/images/pullmanager"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/kubeletadapter"
	"github.com/pullrecords/pullrecords/pullmanager"
)

var kubeletMetricNames = []string{
	pullmanager.MetricOnDiskPullIntents,
	pullmanager.MetricOnDiskPulledRecords,
	pullmanager.MetricInMemoryPullIntentsUsage,
	pullmanager.MetricInMemoryPulledRecordsUsage,
	pullmanager.MetricMustPullChecksTotal,
}

// families gathers g and returns the HELP and TYPE of the named families.
func families(t *testing.T, g prometheus.Gatherer, names []string) map[string]string {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range fams {
		for _, n := range names {
			if f.GetName() == n {
				labels := map[string]bool{}
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = true
					}
				}
				out[n] = fmt.Sprintf("%s | %s | %v", f.GetType(), f.GetHelp(), labels)
			}
		}
	}
	return out
}

// TestMetricsSwap: the library's kubelet-named collectors describe exactly
// what the kubelet's describe, replace them in the kubelet's global
// registry, and then show the library manager's values.
func TestMetricsSwap(t *testing.T) {
	enableGate(t)
	_, ctx := ktesting.NewTestContext(t)

	// Make the kubelet's counter show a series, then read the kubelet's
	// five descriptors from the global registry.
	enforcer, err := upstream.NewImagePullCredentialVerificationPolicy(kubeletconfig.AlwaysVerify, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := upstream.NewFSPullRecordsAccessor(ktesting.NewLogger(t, ktesting.NewConfig()), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	um, err := upstream.NewImagePullManager(ctx, fs, enforcer, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := um.MustAttemptImagePull(ctx, "x:1", "sha256:x", nil); err != nil {
		t.Fatal(err)
	}
	kubeletFamilies := families(t, legacyregistry.DefaultGatherer, kubeletMetricNames)
	if len(kubeletFamilies) != 5 {
		t.Fatalf("found %d of the kubelet's five metrics in the global registry: %v", len(kubeletFamilies), kubeletFamilies)
	}

	// Ours, alone in a registry, describe the same.
	ours := pullmanager.NewMetrics()
	m, err := pullmanager.NewImagePullManager(ctx, newMemRecords(t), enforcer, nil, pullmanager.WithMetrics(ours))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.MustAttemptImagePull(ctx, "x:1", "sha256:x", nil); err != nil {
		t.Fatal(err)
	}
	private := prometheus.NewPedanticRegistry()
	private.MustRegister(ours.KubeletCollectors()...)
	if diff := cmp.Diff(kubeletFamilies, families(t, private, kubeletMetricNames)); diff != "" {
		t.Fatalf("descriptors (-kubelet +library):\n%s", diff)
	}

	// The swap, through the constructor the fork calls.
	dir := t.TempDir()
	rt := newFakeRuntime()
	a, err := kubeletadapter.NewForKubelet(ctx, dir, enforcer, rt, 0, 4, 10,
		kubeletadapter.WithRegisterer(legacyregistry.Registerer()), kubeletadapter.WithStoreOptions(fsstore.WithoutSync()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	for _, img := range []string{"a:1", "b:1"} {
		if err := a.RecordPullIntent(logger, img); err != nil {
			t.Fatal(err)
		}
	}
	a.RecordImagePulled(ctx, "a:1", "sha256:a", &kubeletconfig.ImagePullCredentials{NodePodsAccessible: true})
	for range 3 {
		if _, err := a.MustAttemptImagePull(ctx, "a:1", "sha256:a", nil); err != nil {
			t.Fatal(err)
		}
	}
	want := `# HELP kubelet_imagemanager_image_mustpull_checks_total [ALPHA] Counter for how many times kubelet checked whether credentials need to be re-verified to access an image
# TYPE kubelet_imagemanager_image_mustpull_checks_total counter
kubelet_imagemanager_image_mustpull_checks_total{result="credentialRecordFound"} 3
# HELP kubelet_imagemanager_inmemory_pulledrecords_usage_percent [ALPHA] The ImagePulledRecords in-memory cache usage in percent.
# TYPE kubelet_imagemanager_inmemory_pulledrecords_usage_percent gauge
kubelet_imagemanager_inmemory_pulledrecords_usage_percent 10
# HELP kubelet_imagemanager_inmemory_pullintents_usage_percent [ALPHA] The ImagePullIntents in-memory cache usage in percent.
# TYPE kubelet_imagemanager_inmemory_pullintents_usage_percent gauge
kubelet_imagemanager_inmemory_pullintents_usage_percent 25
# HELP kubelet_imagemanager_ondisk_pulledrecords [ALPHA] Number of ImagePulledRecords stored on disk.
# TYPE kubelet_imagemanager_ondisk_pulledrecords gauge
kubelet_imagemanager_ondisk_pulledrecords 1
# HELP kubelet_imagemanager_ondisk_pullintents [ALPHA] Number of ImagePullIntents stored on disk.
# TYPE kubelet_imagemanager_ondisk_pullintents gauge
kubelet_imagemanager_ondisk_pullintents 1
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), kubeletMetricNames...); err != nil {
		t.Fatal(err)
	}

	// A second swap (a second manager in the same process) replaces ours.
	if err := kubeletadapter.SwapKubeletMetrics(legacyregistry.Registerer(), pullmanager.NewMetrics(), false); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsSwapRefusesOtherDescriptors: a registry holding a collector of
// one of the names with another HELP text is left alone and reported.
func TestMetricsSwapRefusesOtherDescriptors(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: pullmanager.MetricOnDiskPullIntents, Help: "[BETA] something else"}))
	err := kubeletadapter.SwapKubeletMetrics(reg, pullmanager.NewMetrics(), false)
	if err == nil || !strings.Contains(err.Error(), pullmanager.MetricOnDiskPullIntents) {
		t.Fatalf("err = %v, want one naming %s", err, pullmanager.MetricOnDiskPullIntents)
	}
	got := families(t, reg, kubeletMetricNames)
	if len(got) != 1 || !strings.Contains(got[pullmanager.MetricOnDiskPullIntents], "[BETA] something else") {
		t.Errorf("registry changed: %v", got)
	}
}

// TestMetricsSwapLeavesAbsentOut: names the registry does not hold (the
// kubelet did not register them) stay absent; extras are added on request.
func TestMetricsSwapLeavesAbsentOut(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := kubeletadapter.SwapKubeletMetrics(reg, pullmanager.NewMetrics(), true); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	// Extras: only the histogram has a series before use.
	if diff := cmp.Diff([]string{"kubelet_imagemanager_image_mustpull_check_duration_seconds"}, names); diff != "" {
		t.Errorf("families (-want +got):\n%s", diff)
	}
}

func newMemRecords(t *testing.T) accessor.PullRecordsAccessor {
	t.Helper()
	store, err := fsstore.New(ktesting.NewLogger(t, ktesting.NewConfig()), t.TempDir(), fsstore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

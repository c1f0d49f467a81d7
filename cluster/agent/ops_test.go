package agent

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pullrecords/pullrecords/cluster/internal/metricstest"
	"github.com/pullrecords/pullrecords/cri/critest"
)

// metricValue is the value of name{labels} (counter or gauge) in reg; a
// missing series fails the test.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok, err := metricstest.Value(reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// The agent's metrics count its reports, failed rounds and purge checks;
// Healthy is nil while rounds succeed and fails once no round has
// succeeded for HealthRounds resync intervals (by the agent's clock), and
// is nil again after the next good round.
func TestMetricsAndHealth(t *testing.T) {
	const node = "ops-node"
	h := newHarness(t, node)
	reg := prometheus.NewRegistry()
	m := NewMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	h.agent.metrics = m
	fresh(t, h.dyn, node)
	mustAdd(t, h.fake, "example.com/keep:1")
	mustAdd(t, h.fake, "example.com/old:1")
	busyID := mustAdd(t, h.fake, "example.com/busy:1")
	mustAdd(t, h.fake, "example.com/unrecorded:1")
	h.fake.Intercept(critest.RemoveImage, func(_ context.Context, c critest.Call) error {
		if c.Image == busyID {
			return status.Error(codes.FailedPrecondition, "image is in use by container abc")
		}
		return nil
	})
	var down atomic.Bool
	h.fake.Intercept(critest.ImageFsInfo, func(context.Context, critest.Call) error {
		if down.Load() {
			return status.Error(codes.Unavailable, "connection refused")
		}
		return nil
	})
	if err := h.agent.Healthy(); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Healthy() before Run = %v, want not running", err)
	}
	purge := []string{"example.com/old:1", "example.com/busy:1", "example.com/unrecorded:1"}
	controllerApply(t, h.dyn, node, specRefs([]string{"example.com/keep:1"}, purge,
		map[string]string{"example.com/old:1": "example.com/old:1", "example.com/busy:1": "example.com/busy:1"}))
	h.run(t)
	ni := waitFor(t, h.dyn, node, "agent report", reported)
	// The round counts its report once the write has returned, a moment
	// after the object shows it.
	for end := time.Now().Add(deadline); metricValue(t, reg, "pullrecords_agent_reports_total", nil) < 1 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if len(ni.Status.Images) != 4 {
		t.Fatalf("status.images = %+v, want 4 entries", ni.Status.Images)
	}
	if h.fake.Image("example.com/unrecorded:1") == nil {
		t.Error("unrecorded:1, which no cache's pull recorded, was removed")
	}
	if err := h.agent.Healthy(); err != nil {
		t.Errorf("Healthy() after a report = %v", err)
	}
	if v := metricValue(t, reg, "pullrecords_agent_reports_total", nil); v < 1 {
		t.Errorf("reports_total = %v, want at least 1", v)
	}
	if v := metricValue(t, reg, "pullrecords_agent_last_report_timestamp_seconds", nil); v != float64(start.Unix()) {
		t.Errorf("last_report_timestamp_seconds = %v, want the fake clock's %d", v, start.Unix())
	}
	if v := metricValue(t, reg, "pullrecords_agent_purges_total", map[string]string{"outcome": "removed"}); v != 1 {
		t.Errorf("purges_total{removed} = %v, want 1 (old:1)", v)
	}
	if v := metricValue(t, reg, "pullrecords_agent_purges_total", map[string]string{"outcome": "failed"}); v < 1 {
		t.Errorf("purges_total{failed} = %v, want at least 1 (busy:1)", v)
	}
	if v := metricValue(t, reg, "pullrecords_agent_purges_total", map[string]string{"outcome": "kept"}); v < 1 {
		t.Errorf("purges_total{kept} = %v, want at least 1 (unrecorded:1)", v)
	}

	// The runtime goes away: rounds fail and are counted; once the clock
	// is more than HealthRounds intervals past the last good round the
	// agent is unhealthy.
	down.Store(true)
	var err error
	for i := 0; i < 2*HealthRounds+2; i++ {
		h.step(t)
		if err = h.agent.Healthy(); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "no successful report round") {
		t.Fatalf("Healthy() with the runtime unreachable for %d intervals = %v, want an error", 2*HealthRounds+2, err)
	}
	if v := metricValue(t, reg, "pullrecords_agent_report_errors_total", map[string]string{"stage": "runtime"}); v < 1 {
		t.Errorf("report_errors_total{runtime} = %v, want at least 1", v)
	}
	down.Store(false)
	for i := 0; i < 10 && h.agent.Healthy() != nil; i++ {
		h.step(t)
		h.waitRound(t, "-")
	}
	if err := h.agent.Healthy(); err != nil {
		t.Errorf("Healthy() after the runtime came back = %v", err)
	}
}

// A nil *Metrics counts nothing and does not panic.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.reported(start)
	m.failed(stageWrite)
	m.purged(outcomeKept)
	if m != nil {
		t.Fatal("unreachable")
	}
}

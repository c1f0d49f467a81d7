package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stages of a failed round, the stage label of the report errors metric.
const (
	stageRuntime = "runtime" // the runtime could not be reached
	stageWrite   = "write"   // the API server refused or did not answer the write
)

// Outcomes of one purge check of one image, the outcome label of the
// purges metric.
const (
	outcomeRemoved = "removed" // RemoveImage succeeded
	outcomeFailed  = "failed"  // RemoveImage failed
	outcomeKept    = "kept"    // a check kept the image (another cache, pinned, in use, other tags, no record)
)

// Metrics counts the agent's work (Config.Metrics). A nil *Metrics counts
// nothing. Nothing is registered until Register:
//
//	pullrecords_agent_reports_total                  status writes that succeeded
//	pullrecords_agent_report_errors_total{stage}     rounds that wrote nothing because they failed:
//	                                                 "runtime" (unreachable) or "write" (refused)
//	pullrecords_agent_purges_total{outcome}          purge checks by outcome: "removed", "failed",
//	                                                 "kept" (a kept image is counted every round
//	                                                 it is checked)
//	pullrecords_agent_last_report_timestamp_seconds  the agent's clock at its latest successful write
type Metrics struct {
	reports    prometheus.Counter
	errors     *prometheus.CounterVec
	purges     *prometheus.CounterVec
	lastReport prometheus.Gauge
}

// NewMetrics returns the agent's metrics, unregistered.
func NewMetrics() *Metrics {
	m := &Metrics{
		reports: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pullrecords_agent_reports_total",
			Help: "NodeImages status writes (reports and heartbeats) that succeeded.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pullrecords_agent_report_errors_total",
			Help: "Rounds that wrote nothing because they failed, by stage (runtime: unreachable; write: refused).",
		}, []string{"stage"}),
		purges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pullrecords_agent_purges_total",
			Help: "Purge checks of an image by outcome (removed, failed, kept; kept images count every round).",
		}, []string{"outcome"}),
		lastReport: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pullrecords_agent_last_report_timestamp_seconds",
			Help: "Unix time of the agent's latest successful NodeImages status write.",
		}),
	}
	// Every label value from the start, so that rates see the first event.
	for _, s := range []string{stageRuntime, stageWrite} {
		m.errors.WithLabelValues(s)
	}
	for _, o := range []string{outcomeRemoved, outcomeFailed, outcomeKept} {
		m.purges.WithLabelValues(o)
	}
	return m
}

// Register registers every metric with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.reports, m.errors, m.purges, m.lastReport} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) reported(at time.Time) {
	if m == nil {
		return
	}
	m.reports.Inc()
	m.lastReport.Set(float64(at.UnixNano()) / 1e9)
}

func (m *Metrics) failed(stage string) {
	if m != nil {
		m.errors.WithLabelValues(stage).Inc()
	}
}

func (m *Metrics) purged(outcome string) {
	if m != nil {
		m.purges.WithLabelValues(outcome).Inc()
	}
}

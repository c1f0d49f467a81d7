package controller

import "github.com/prometheus/client_golang/prometheus"

// Queue names, the queue label of the sync metrics.
const (
	queueImageCaches = "imagecaches"
	queueNodeImages  = "nodeimages"
)

// resultStatuses are the result statuses the results metric knows; any
// other is counted as "other", so the label set stays bounded.
var resultStatuses = map[string]bool{
	"succeeded": true, "failed": true, "alreadypulled": true, "jobcreated": true, "unknown": true,
}

// Metrics counts the controller's work (Config.Metrics). A nil *Metrics
// counts nothing. Nothing is registered until Register:
//
//	pullrecords_controller_syncs_total{queue}        syncs run ("imagecaches", "nodeimages")
//	pullrecords_controller_sync_errors_total{queue}  syncs that failed and were queued again
//	pullrecords_controller_prepull_pods_created_total pre-pull pods this process created
//	pullrecords_controller_results_total{status}     results decided (kube-fledged's status:
//	                                                 succeeded, failed, alreadypulled, ...; a result
//	                                                 decided again unchanged is not counted twice)
//	pullrecords_controller_is_leader                 1 while this process runs the loops (under
//	                                                 leader election: while it holds the Lease)
type Metrics struct {
	syncs, syncErrors *prometheus.CounterVec
	podsCreated       prometheus.Counter
	results           *prometheus.CounterVec
	isLeader          prometheus.Gauge
}

// NewMetrics returns the controller's metrics, unregistered.
func NewMetrics() *Metrics {
	m := &Metrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pullrecords_controller_syncs_total",
			Help: "Syncs the controller ran, by queue (imagecaches, nodeimages).",
		}, []string{"queue"}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pullrecords_controller_sync_errors_total",
			Help: "Syncs that failed and were queued again with back-off, by queue.",
		}, []string{"queue"}),
		podsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pullrecords_controller_prepull_pods_created_total",
			Help: "Pre-pull pods this controller process created.",
		}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pullrecords_controller_results_total",
			Help: "Per-node results the controller decided, by kube-fledged status.",
		}, []string{"status"}),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pullrecords_controller_is_leader",
			Help: "1 while this process runs the controller's loops (holds the Lease under leader election), else 0.",
		}),
	}
	// Every label value from the start: a rate over a series that appears
	// only at its first event misses that event.
	for _, q := range []string{queueImageCaches, queueNodeImages} {
		m.syncs.WithLabelValues(q)
		m.syncErrors.WithLabelValues(q)
	}
	for s := range resultStatuses {
		m.results.WithLabelValues(s)
	}
	return m
}

// Register registers every metric with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.syncs, m.syncErrors, m.podsCreated, m.results, m.isLeader} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) synced(queue string, err error) {
	if m == nil {
		return
	}
	m.syncs.WithLabelValues(queue).Inc()
	if err != nil {
		m.syncErrors.WithLabelValues(queue).Inc()
	}
}

func (m *Metrics) podCreated() {
	if m != nil {
		m.podsCreated.Inc()
	}
}

func (m *Metrics) resultDecided(status string) {
	if m == nil {
		return
	}
	if !resultStatuses[status] {
		status = "other"
	}
	m.results.WithLabelValues(status).Inc()
}

func (m *Metrics) leading(on bool) {
	if m == nil {
		return
	}
	if on {
		m.isLeader.Set(1)
	} else {
		m.isLeader.Set(0)
	}
}

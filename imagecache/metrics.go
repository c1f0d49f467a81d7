package imagecache

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	queueDepth   prometheus.GaugeFunc
	results      *prometheus.CounterVec
	pulls        *prometheus.CounterVec
	pullDuration *prometheus.HistogramVec
}

func newMetrics(depth func() float64) *metrics {
	return &metrics{
		queueDepth: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "imagecache", Name: "queue_depth",
			Help: "Images waiting in the image cache work queue.",
		}, depth),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "imagecache", Name: "results_total",
			Help: "Final results of image cache requests, by work type and status.",
		}, []string{"work_type", "status"}),
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "imagecache", Name: "pulls_total",
			Help: "CRI image pulls made by the image cache, by result (succeeded, failed).",
		}, []string{"result"}),
		pullDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "imagecache", Name: "pull_duration_seconds",
			Help:    "Duration of CRI image pulls made by the image cache, by result.",
			Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"result"}),
	}
}

// Collectors returns the manager's Prometheus collectors, for the caller to
// register wherever it wants; nothing is registered globally.
func (m *Manager) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.metrics.queueDepth, m.metrics.results, m.metrics.pulls, m.metrics.pullDuration}
}

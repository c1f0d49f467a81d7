package pullmanager

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pullrecords/pullrecords/accessor"
)

// Check results, the values of the result label of
// kubelet_imagemanager_image_mustpull_checks_total (the kubelet's values).
const (
	ResultCredentialPolicyAllowed = "credentialPolicyAllowed"
	ResultCredentialRecordFound   = "credentialRecordFound"
	ResultMustAuthenticate        = "mustAuthenticate"
	ResultError                   = "error"
)

type checkResult uint8

const (
	resultError checkResult = iota
	resultPolicyAllowed
	resultRecordFound
	resultMustAuthenticate
	numResults
)

var resultLabels = [numResults]string{
	resultError:            ResultError,
	resultPolicyAllowed:    ResultCredentialPolicyAllowed,
	resultRecordFound:      ResultCredentialRecordFound,
	resultMustAuthenticate: ResultMustAuthenticate,
}

// Metrics holds the manager's Prometheus collectors. Nothing is registered
// globally: the embedding program registers Collectors() where it wants.
//
// The names are the kubelet's (subsystem kubelet_imagemanager):
//   - kubelet_imagemanager_ondisk_pullintents, gauge: stored intents;
//   - kubelet_imagemanager_ondisk_pulledrecords, gauge: stored pulled records;
//   - kubelet_imagemanager_image_mustpull_checks_total{result}, counter: one
//     per MustAttemptImagePull of a present image, result one of
//     credentialPolicyAllowed, credentialRecordFound, mustAuthenticate, error.
//
// The gauges are read from the store's accessor.RecordCounter (O(1)) after
// every write and delete and at start-up; a store without it leaves them at 0.
//
// New metrics the kubelet does not have:
//   - kubelet_imagemanager_image_mustpull_check_duration_seconds, histogram:
//     latency of MustAttemptImagePull for a present image;
//   - kubelet_imagemanager_image_mustpull_record_lookups_total{result}, counter:
//     result "hit" when a check found a pulled record for the imageRef, "miss"
//     when it did not;
//   - kubelet_imagemanager_image_name_cache_lookups_total{result}, counter:
//     "hit" when a check found the image string's normalised name in the
//     manager's name cache, "miss" when it had to parse the string.
type Metrics struct {
	intents prometheus.Gauge
	records prometheus.Gauge

	checks      *prometheus.CounterVec
	checkByCode [numResults]prometheus.Counter

	duration prometheus.Histogram

	recordLookups *prometheus.CounterVec
	recordHit     prometheus.Counter
	recordMiss    prometheus.Counter

	nameLookups *prometheus.CounterVec
	nameHit     prometheus.Counter
	nameMiss    prometheus.Counter
}

// NewMetrics creates a fresh, unregistered set of the manager's metrics.
func NewMetrics() *Metrics {
	const ns, sub = "kubelet", "imagemanager"
	m := &Metrics{
		intents: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "ondisk_pullintents",
			Help: "Number of image pull intents stored on the node.",
		}),
		records: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "ondisk_pulledrecords",
			Help: "Number of image pulled records stored on the node.",
		}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "image_mustpull_checks_total",
			Help: "Number of checks whether a pod must pull an image already present on the node, by result.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "image_mustpull_check_duration_seconds",
			Help:    "Time taken to decide whether a pod must pull an image already present on the node.",
			Buckets: prometheus.ExponentialBuckets(250e-9, 4, 12),
		}),
		recordLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "image_mustpull_record_lookups_total",
			Help: "Pulled-record lookups made by image checks: hit when a record existed for the imageRef, miss otherwise.",
		}, []string{"result"}),
		nameLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "image_name_cache_lookups_total",
			Help: "Image name normalisations made by image checks: hit when served from the cache, miss when parsed.",
		}, []string{"result"}),
	}
	for r := checkResult(0); r < numResults; r++ {
		m.checkByCode[r] = m.checks.WithLabelValues(resultLabels[r])
	}
	m.recordHit = m.recordLookups.WithLabelValues("hit")
	m.recordMiss = m.recordLookups.WithLabelValues("miss")
	m.nameHit = m.nameLookups.WithLabelValues("hit")
	m.nameMiss = m.nameLookups.WithLabelValues("miss")
	return m
}

// Collectors returns every collector, for the caller to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.intents, m.records, m.checks, m.duration, m.recordLookups, m.nameLookups}
}

// observeCheck records one check. m must not be nil.
func (m *Metrics) observeCheck(r checkResult, took time.Duration) {
	m.checkByCode[r].Inc()
	m.duration.Observe(took.Seconds())
}

func (m *Metrics) recordLookup(hit bool) {
	if hit {
		m.recordHit.Inc()
	} else {
		m.recordMiss.Inc()
	}
}

func (m *Metrics) nameLookup(hit bool) {
	if hit {
		m.nameHit.Inc()
	} else {
		m.nameMiss.Inc()
	}
}

// updateCounts refreshes the stored-record gauges from counter, if any.
func (m *Metrics) updateCounts(counter accessor.RecordCounter) {
	if m == nil || counter == nil {
		return
	}
	m.intents.Set(float64(counter.CountImagePullIntents()))
	m.records.Set(float64(counter.CountImagePulledRecords()))
}

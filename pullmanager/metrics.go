package pullmanager

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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

// The full names of the five metrics the kubelet's own pull manager exports.
const (
	MetricOnDiskPullIntents          = "kubelet_imagemanager_ondisk_pullintents"
	MetricOnDiskPulledRecords        = "kubelet_imagemanager_ondisk_pulledrecords"
	MetricInMemoryPullIntentsUsage   = "kubelet_imagemanager_inmemory_pullintents_usage_percent"
	MetricInMemoryPulledRecordsUsage = "kubelet_imagemanager_inmemory_pulledrecords_usage_percent"
	MetricMustPullChecksTotal        = "kubelet_imagemanager_image_mustpull_checks_total"
)

// The kubelet's HELP texts as it exposes them: component-base puts the
// stability level in front of the text given in the code.
const (
	kubeletStabilityPrefix         = "[ALPHA] "
	helpOnDiskPullIntents          = kubeletStabilityPrefix + "Number of ImagePullIntents stored on disk."
	helpOnDiskPulledRecords        = kubeletStabilityPrefix + "Number of ImagePulledRecords stored on disk."
	helpInMemoryPullIntentsUsage   = kubeletStabilityPrefix + "The ImagePullIntents in-memory cache usage in percent."
	helpInMemoryPulledRecordsUsage = kubeletStabilityPrefix + "The ImagePulledRecords in-memory cache usage in percent."
	helpMustPullChecksTotal        = kubeletStabilityPrefix + "Counter for how many times kubelet checked whether credentials need to be re-verified to access an image"
)

// The metrics the kubelet does not have.
const (
	metricMustPullCheckDuration      = "kubelet_imagemanager_image_mustpull_check_duration_seconds"
	metricMustPullRecordLookupsTotal = "kubelet_imagemanager_image_mustpull_record_lookups_total"
	metricImageNameCacheLookupsTotal = "kubelet_imagemanager_image_name_cache_lookups_total"
	helpMustPullCheckDuration        = "Time taken to decide whether a pod must pull an image already present on the node."
	helpMustPullRecordLookupsTotal   = "Pulled-record lookups made by image checks: hit when a record existed for the imageRef, miss otherwise."
	helpImageNameCacheLookupsTotal   = "Image name parses made by image checks: hit when served from the cache, miss when parsed."

	resultLabel           = "result"
	lookupHit, lookupMiss = "hit", "miss"
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
// The first five are the kubelet's, with its names, types, label names and
// HELP texts exactly as a kubelet exposes them (component-base prefixes the
// stability level, so the texts start with "[ALPHA] "). A scrape cannot tell
// them from the kubelet's own; KubeletCollectors returns just these:
//   - kubelet_imagemanager_ondisk_pullintents, gauge: stored intents;
//   - kubelet_imagemanager_ondisk_pulledrecords, gauge: stored pulled records;
//   - kubelet_imagemanager_inmemory_pullintents_usage_percent and
//     kubelet_imagemanager_inmemory_pulledrecords_usage_percent, gauges: in
//     the kubelet, how full its LRU caches are (len*100/size, whole
//     percent). Our cache (memstore.Cache) holds every record and never
//     evicts, so by default both stay at 0, meaning "no eviction pressure,
//     the cache stays authoritative". After SetNominalCacheSizes they report
//     count*100/size against the sizes given (the kubelet's, say), whole
//     percent, capped at 100: what the kubelet's cache, which never holds
//     more than its size, would show. A kubelet's gauge cannot pass 100, and
//     alerts written for it ("above 90 %") must not fire on a node that
//     merely has more records than the kubelet's cache would hold; 100 means
//     the kubelet's cache would be full and evicting, which ours never is;
//   - kubelet_imagemanager_image_mustpull_checks_total{result}, counter: one
//     per MustAttemptImagePull of a present image, result one of
//     credentialPolicyAllowed, credentialRecordFound, mustAuthenticate, error.
//     As in the kubelet, a result's series appears on its first check; a
//     scrape before any check shows no series at all.
//
// The gauges are read from the store's accessor.RecordCounter (O(1)) after
// every write and delete and at start-up; a store without it leaves them at 0.
// The kubelet does not set them at start-up, so after a restart it shows 0
// until the first write; this Metrics shows the stored counts at once.
//
// New metrics the kubelet does not have (ExtraCollectors), with series also
// created on first use:
//   - kubelet_imagemanager_image_mustpull_check_duration_seconds, histogram:
//     latency of MustAttemptImagePull for a present image;
//   - kubelet_imagemanager_image_mustpull_record_lookups_total{result}, counter:
//     result "hit" when a check found a pulled record for the imageRef, "miss"
//     when it did not;
//   - kubelet_imagemanager_image_name_cache_lookups_total{result}, counter:
//     "hit" when a check found the image string's mapping key in the
//     manager's name cache, "miss" when it had to parse the string.
type Metrics struct {
	intents prometheus.Gauge
	records prometheus.Gauge

	intentsUsage prometheus.Gauge
	recordsUsage prometheus.Gauge
	// nominal holds the sizes set by SetNominalCacheSizes; nil means
	// unbounded (usage 0).
	nominal atomic.Pointer[[2]int]

	checks      *prometheus.CounterVec
	checkByCode [numResults]*lazyCounter

	duration prometheus.Histogram

	recordLookups *prometheus.CounterVec
	recordHit     *lazyCounter
	recordMiss    *lazyCounter

	nameLookups *prometheus.CounterVec
	nameHit     *lazyCounter
	nameMiss    *lazyCounter
}

// NewMetrics creates a fresh, unregistered set of the manager's metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		intents: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricOnDiskPullIntents, Help: helpOnDiskPullIntents,
		}),
		records: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricOnDiskPulledRecords, Help: helpOnDiskPulledRecords,
		}),
		intentsUsage: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricInMemoryPullIntentsUsage, Help: helpInMemoryPullIntentsUsage,
		}),
		recordsUsage: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricInMemoryPulledRecordsUsage, Help: helpInMemoryPulledRecordsUsage,
		}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricMustPullChecksTotal, Help: helpMustPullChecksTotal,
		}, []string{resultLabel}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    metricMustPullCheckDuration,
			Help:    helpMustPullCheckDuration,
			Buckets: prometheus.ExponentialBuckets(250e-9, 4, 12),
		}),
		recordLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricMustPullRecordLookupsTotal, Help: helpMustPullRecordLookupsTotal,
		}, []string{resultLabel}),
		nameLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricImageNameCacheLookupsTotal, Help: helpImageNameCacheLookupsTotal,
		}, []string{resultLabel}),
	}
	for r := checkResult(0); r < numResults; r++ {
		m.checkByCode[r] = newLazyCounter(m.checks, MetricMustPullChecksTotal, helpMustPullChecksTotal, resultLabels[r])
	}
	m.recordHit = newLazyCounter(m.recordLookups, metricMustPullRecordLookupsTotal, helpMustPullRecordLookupsTotal, lookupHit)
	m.recordMiss = newLazyCounter(m.recordLookups, metricMustPullRecordLookupsTotal, helpMustPullRecordLookupsTotal, lookupMiss)
	m.nameHit = newLazyCounter(m.nameLookups, metricImageNameCacheLookupsTotal, helpImageNameCacheLookupsTotal, lookupHit)
	m.nameMiss = newLazyCounter(m.nameLookups, metricImageNameCacheLookupsTotal, helpImageNameCacheLookupsTotal, lookupMiss)
	return m
}

// Collectors returns every collector, for the caller to register: the
// kubelet's five, then the extra ones.
func (m *Metrics) Collectors() []prometheus.Collector {
	return append(m.KubeletCollectors(), m.ExtraCollectors()...)
}

// KubeletCollectors returns the five collectors that carry the kubelet's
// metric names and descriptors, in the kubelet's order: ondisk_pullintents,
// ondisk_pulledrecords, inmemory_pullintents_usage_percent,
// inmemory_pulledrecords_usage_percent, image_mustpull_checks_total. Each
// describes exactly what the kubelet's collector of that name describes, so
// prometheus.Registerer.Unregister given one of them removes the kubelet's
// (see the kubeletadapter module).
func (m *Metrics) KubeletCollectors() []prometheus.Collector {
	return []prometheus.Collector{m.intents, m.records, m.intentsUsage, m.recordsUsage, m.checks}
}

// ExtraCollectors returns the collectors of the metrics the kubelet does not
// have.
func (m *Metrics) ExtraCollectors() []prometheus.Collector {
	return []prometheus.Collector{m.duration, m.recordLookups, m.nameLookups}
}

// SetNominalCacheSizes makes the two in-memory usage gauges report the stored
// counts against these sizes (count*100/size, whole percent, not capped), as
// the kubelet's LRU caches of these sizes would, from the next update on.
// A size below 1 turns its gauge back to 0 (unbounded). The kubelet's sizes
// are max(2*maxPods, 2*maxParallelImagePulls) intents and 5*maxPods records.
func (m *Metrics) SetNominalCacheSizes(intents, records int) {
	m.nominal.Store(&[2]int{intents, records})
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

// updateCounts refreshes the stored-record gauges and the usage gauges from
// counter, if any.
func (m *Metrics) updateCounts(counter accessor.RecordCounter) {
	if m == nil || counter == nil {
		return
	}
	intents, records := counter.CountImagePullIntents(), counter.CountImagePulledRecords()
	m.intents.Set(float64(intents))
	m.records.Set(float64(records))
	var sizes [2]int
	if p := m.nominal.Load(); p != nil {
		sizes = *p
	}
	m.intentsUsage.Set(usagePercent(intents, sizes[0]))
	m.recordsUsage.Set(usagePercent(records, sizes[1]))
}

// usagePercent is count*100/size in whole percent, as the kubelet computes
// it, capped at 100 (the kubelet's LRU never holds more than size), or 0 for
// an unbounded cache (size < 1).
func usagePercent(count, size int) float64 {
	if size < 1 {
		return 0
	}
	return float64(min(count*100/size, 100))
}

// lazyCounter is one series of a CounterVec that is created on its first
// increment, as the kubelet creates its series (WithLabelValues at use), and
// kept afterwards so an increment costs no label lookup. Until then it reads
// as 0 and the vector exposes no series for it.
type lazyCounter struct {
	vec   *prometheus.CounterVec
	value string
	desc  *prometheus.Desc
	once  sync.Once
	child atomic.Pointer[prometheus.Counter]
}

var _ prometheus.Metric = (*lazyCounter)(nil)

func newLazyCounter(vec *prometheus.CounterVec, name, help, value string) *lazyCounter {
	return &lazyCounter{
		vec:   vec,
		value: value,
		desc:  prometheus.NewDesc(name, help, nil, prometheus.Labels{resultLabel: value}),
	}
}

// Inc adds one, creating the series first if this is its first use.
func (l *lazyCounter) Inc() {
	if c := l.child.Load(); c != nil {
		(*c).Inc()
		return
	}
	l.once.Do(func() {
		c := l.vec.WithLabelValues(l.value)
		l.child.Store(&c)
	})
	(*l.child.Load()).Inc()
}

// Desc describes the series (prometheus.Metric).
func (l *lazyCounter) Desc() *prometheus.Desc {
	if c := l.child.Load(); c != nil {
		return (*c).Desc()
	}
	return l.desc
}

// Write writes the series' value, 0 while it does not exist yet
// (prometheus.Metric). It never creates the series.
func (l *lazyCounter) Write(out *dto.Metric) error {
	if c := l.child.Load(); c != nil {
		return (*c).Write(out)
	}
	zero := 0.0
	out.Counter = &dto.Counter{Value: &zero}
	return nil
}

// created reports whether the series exists.
func (l *lazyCounter) created() bool { return l.child.Load() != nil }

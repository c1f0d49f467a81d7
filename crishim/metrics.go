package crishim

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Result is the outcome of one Admit, the value of the result label of
// pullrecords_shim_verifications_total.
type Result string

// The results.
const (
	// ResultAccepted: the origin accepted the credential (just now or, for a
	// remembered admission, within the TTL).
	ResultAccepted Result = "accepted"
	// ResultDenied: the origin refused the credential (401/403), or the
	// verifier failed in a way Classify does not name.
	ResultDenied Result = "denied"
	// ResultNotFound: the origin has no such repository or reference.
	ResultNotFound Result = "not_found"
	// ResultUnreachable: the origin could not be asked (network, timeout,
	// 5xx).
	ResultUnreachable Result = "unreachable"
	// ResultInvalid: the image string does not parse, or the verifier said
	// the reference is invalid.
	ResultInvalid Result = "invalid"
	// ResultMirrorOnly: the registry is configured mirror-only; nothing was
	// asked.
	ResultMirrorOnly Result = "mirror_only"
	// ResultNotProven: the registry answered but did not prove it holds
	// the image's content (a manifest that does not hash to its digest, a
	// blob the node holds answered with other bytes).
	ResultNotProven Result = "not_proven"
	// ResultUnverifiedContent: after an admitted pull, the runtime held
	// the image under no digest the origin proved (Pull).
	ResultUnverifiedContent Result = "unverified_content"
	// ResultPrivateContent: a mirror-only pull resolved to content the
	// node holds from a pull made with a pod's credential (Pull).
	ResultPrivateContent Result = "private_content"
)

var allResults = [...]Result{ResultAccepted, ResultDenied, ResultNotFound, ResultUnreachable, ResultInvalid, ResultMirrorOnly,
	ResultNotProven, ResultUnverifiedContent, ResultPrivateContent}

// ClassifyBySentinels returns a Config.Classify that maps a verifier error
// matching (errors.Is) one of the given sentinels to its result, a context
// cancellation or deadline to ResultUnreachable, and anything else to
// ResultDenied. Nil sentinels are skipped. With originverify:
//
//	crishim.ClassifyBySentinels(originverify.ErrDenied, originverify.ErrNotFound,
//		originverify.ErrUnreachable, originverify.ErrInvalidReference, originverify.ErrNotProven)
func ClassifyBySentinels(denied, notFound, unreachable, invalid, notProven error) func(error) Result {
	return func(err error) Result {
		for _, s := range [...]struct {
			sentinel error
			result   Result
		}{{notProven, ResultNotProven}, {denied, ResultDenied}, {notFound, ResultNotFound}, {unreachable, ResultUnreachable}, {invalid, ResultInvalid}} {
			if s.sentinel != nil && errors.Is(err, s.sentinel) {
				return s.result
			}
		}
		return defaultClassify(err)
	}
}

// defaultClassify is Classify when Config leaves it nil.
func defaultClassify(err error) Result {
	if isContextError(err) {
		return ResultUnreachable
	}
	return ResultDenied
}

// Metric names.
const (
	MetricVerificationsTotal   = "pullrecords_shim_verifications_total"
	MetricRememberedTotal      = "pullrecords_shim_remembered_total"
	MetricOriginRequestSeconds = "pullrecords_shim_origin_request_seconds"
)

// Metrics are the gate's Prometheus collectors. A nil *Metrics is valid and
// records nothing. Nothing is registered globally: call Register.
type Metrics struct {
	verifications *prometheus.CounterVec
	byResult      map[Result]prometheus.Counter
	remembered    prometheus.Counter
	originSeconds prometheus.Histogram
}

// NewMetrics returns unregistered collectors, every result label already
// at zero.
func NewMetrics() *Metrics {
	m := &Metrics{
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricVerificationsTotal,
			Help: "Pull decisions of the shim's gate, by result: accepted (by the origin, now or within the TTL), denied, not_found, unreachable, invalid, not_proven (the registry did not prove it holds the content), mirror_only (not checked), and after the pull unverified_content or private_content (refused, its names removed).",
		}, []string{"result"}),
		remembered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricRememberedTotal,
			Help: "Pulls admitted from a verification remembered within the TTL, without asking the origin.",
		}),
		originSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricOriginRequestSeconds,
			Help:    "Time taken by one origin registry check (shared by concurrent identical requests).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		byResult: make(map[Result]prometheus.Counter, len(allResults)),
	}
	for _, r := range allResults {
		m.byResult[r] = m.verifications.WithLabelValues(string(r))
	}
	return m
}

// Register registers the three collectors with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	if m == nil {
		return nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.verifications, m.remembered, m.originSeconds} {
		errs = append(errs, r.Register(c))
	}
	return errors.Join(errs...)
}

func (m *Metrics) result(r Result) {
	if m == nil {
		return
	}
	if c, ok := m.byResult[r]; ok {
		c.Inc()
	}
}

func (m *Metrics) rememberedHit() {
	if m == nil {
		return
	}
	m.remembered.Inc()
	m.byResult[ResultAccepted].Inc()
}

func (m *Metrics) originRequest(d time.Duration) {
	if m == nil {
		return
	}
	m.originSeconds.Observe(d.Seconds())
}

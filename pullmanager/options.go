package pullmanager

import "k8s.io/utils/clock"

// Option configures a PullManager.
type Option func(*options)

type options struct {
	clock            clock.PassiveClock
	metrics          *Metrics
	protectPreloaded bool
	lockStripes      int
}

func defaultOptions() options {
	return options{clock: clock.RealClock{}, lockStripes: defaultLockStripes}
}

// WithClock sets the clock used for LastUpdatedTime and for the check-latency
// histogram. Tests pass a k8s.io/utils/clock/testing fake clock.
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithMetrics makes the manager report to m. Without it (or with nil) the
// manager does no metrics work at all.
func WithMetrics(m *Metrics) Option {
	return func(o *options) { o.metrics = m }
}

// WithPreloadedImageProtection turns on the fix for kubernetes#138175 (default
// off, as upstream): a pulled record for the imageRef that has no credential
// mapping entry for the requested image's normalised name does not make the
// image "pulled by the kubelet" for the policy. Then a preloaded image stays
// usable under its preloaded name after a credentialed pull of the same
// content under another name. See the package documentation for the
// trade-off.
func WithPreloadedImageProtection(on bool) Option {
	return func(o *options) { o.protectPreloaded = on }
}

// WithLockStripes sets how many lock stripes guard per-key writes (values
// below 1 mean 1; there is no upper bound). The default is 64.
func WithLockStripes(n int) Option {
	return func(o *options) { o.lockStripes = n }
}

// defaultLockStripes is the number of per-key lock stripes used when no
// WithLockStripes option is given.
const defaultLockStripes = 64

package pullmanager

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/credstamp"
)

// Option configures a PullManager. An option given a value it cannot use
// (a nil clock, fewer than one lock stripe) makes NewImagePullManager fail
// with an error matching ErrInvalidOption that names the option and the
// value; it is never ignored or adjusted.
type Option func(*options)

type options struct {
	clock            clock.PassiveClock
	metrics          *Metrics
	protectPreloaded bool
	normalizedNames  bool
	lockStripes      int
	expiry           time.Duration
	stamps           *credstamp.Store
}

func defaultOptions() options {
	return options{clock: clock.RealClock{}, lockStripes: defaultLockStripes}
}

// validate reports the first option value the manager cannot use.
func (o *options) validate() error {
	switch {
	case o.clock == nil:
		return fmt.Errorf("%w: WithClock(nil): want a clock", ErrInvalidOption)
	case o.lockStripes < 1:
		return fmt.Errorf("%w: WithLockStripes(%d): want at least 1", ErrInvalidOption, o.lockStripes)
	case o.expiry > 0 && o.stamps == nil:
		return fmt.Errorf("%w: WithCredentialExpiry(%v, nil): want a stamp store for a TTL above zero", ErrInvalidOption, o.expiry)
	case o.expiry <= 0 && o.stamps != nil:
		return fmt.Errorf("%w: WithCredentialExpiry(%v, store): want a TTL above zero (or a nil store, for off)", ErrInvalidOption, o.expiry)
	}
	return nil
}

// WithClock sets the clock used for LastUpdatedTime and for the check-latency
// histogram (default the real clock). Tests pass a
// k8s.io/utils/clock/testing fake clock. A nil clock is invalid
// (ErrInvalidOption).
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) { o.clock = c }
}

// WithMetrics makes the manager report to m. Without it (or with nil, which
// is valid and means the same) the manager does no metrics work at all.
func WithMetrics(m *Metrics) Option {
	return func(o *options) { o.metrics = m }
}

// WithPreloadedImageProtection turns on the fix for kubernetes#138175 (default
// off, as upstream): a pulled record for the imageRef that has no credential
// mapping entry for the requested image's mapping key does not make the
// image "pulled by the kubelet" for the policy. Then a preloaded image stays
// usable under its preloaded name after a credentialed pull of the same
// content under another name. See the package documentation for the
// trade-off.
func WithPreloadedImageProtection(on bool) Option {
	return func(o *options) { o.protectPreloaded = on }
}

// WithNormalizedImageNames (default off, as upstream) keys credential
// mappings by the fully qualified repository name (NormalizeImageName)
// instead of the kubelet's raw string with tag and digest cut (MappingKey),
// and matches leftover intents against the runtime's tags in normalised form
// at start-up. Then "busybox", "library/busybox:1" and
// "docker.io/library/busybox@sha256:…" share one mapping entry, so a secret
// recorded for one spelling serves a pod that writes another: the same
// repository on the same registry, so the same credentials would be asked
// for, and nothing is granted that a pull would refuse.
//
// It is not compatible with the kubelet: records written in this mode carry
// keys the kubelet never looks up for short names, and records the kubelet
// wrote with short-name keys are not found here. After a switch in either
// direction, pods using short names re-pull under IfNotPresent and fail
// with ErrImageNeverPull under Never until their records are rewritten. Use
// it only on nodes where no stock kubelet reads or writes the same
// directory.
func WithNormalizedImageNames(on bool) Option {
	return func(o *options) { o.normalizedNames = on }
}

// WithLockStripes sets how many lock stripes guard per-key writes (default
// 64; there is no upper bound). n below 1 is invalid (ErrInvalidOption).
func WithLockStripes(n int) Option {
	return func(o *options) { o.lockStripes = n }
}

// defaultLockStripes is the number of per-key lock stripes used when no
// WithLockStripes option is given.
const defaultLockStripes = 64

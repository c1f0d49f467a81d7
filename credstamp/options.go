package credstamp

import "k8s.io/utils/clock"

// Option configures Open.
type Option func(*options)

type options struct {
	clock clock.PassiveClock
}

// WithClock sets the clock that stamps and freshness checks read (the real
// clock by default). Tests pass a fake clock.
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

package imagecache

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// Defaults.
const (
	DefaultWorkers            = 2
	defaultRequestTimeout     = 5 * time.Minute
	defaultMaxAttempts        = 4
	defaultRetryBaseDelay     = time.Second
	defaultRetryMaxDelay      = 2 * time.Minute
	defaultRefreshCheckPeriod = 10 * time.Second
)

// Option configures New and NewStandalone. An option given a value it cannot
// use (fewer than one worker or attempt, a zero or negative duration) makes
// the constructor fail with an error matching ErrInvalidOption that names the
// option and the value; it is never ignored or adjusted.
// Options whose zero value is their default (an empty state directory or node
// name, a nil handler) accept it.
type Option func(*options)

type options struct {
	workers            int
	requestTimeout     time.Duration
	maxAttempts        int
	retryBase          time.Duration
	retryMax           time.Duration
	refreshCheckPeriod time.Duration
	clock              clock.WithTicker
	stateDir           string
	node               string
	runtimeVersion     string
	onResult           func(ImageWorkResult)
	onStatus           func(CacheStatus)
}

func defaultOptions() options {
	return options{
		workers:            DefaultWorkers,
		requestTimeout:     defaultRequestTimeout,
		maxAttempts:        defaultMaxAttempts,
		retryBase:          defaultRetryBaseDelay,
		retryMax:           defaultRetryMaxDelay,
		refreshCheckPeriod: defaultRefreshCheckPeriod,
		clock:              clock.RealClock{},
	}
}

func (o *options) validate() error {
	switch {
	case o.workers < 1:
		return fmt.Errorf("%w: WithWorkers(%d): want at least 1", ErrInvalidOption, o.workers)
	case o.requestTimeout <= 0:
		return fmt.Errorf("%w: WithRequestTimeout(%v): want more than 0", ErrInvalidOption, o.requestTimeout)
	case o.maxAttempts < 1:
		return fmt.Errorf("%w: WithRetries(%d, %v, %v): want at least 1 attempt", ErrInvalidOption, o.maxAttempts, o.retryBase, o.retryMax)
	case o.retryBase <= 0:
		return fmt.Errorf("%w: WithRetries(%d, %v, %v): want a base delay more than 0", ErrInvalidOption, o.maxAttempts, o.retryBase, o.retryMax)
	case o.retryMax < o.retryBase:
		return fmt.Errorf("%w: WithRetries(%d, %v, %v): want a max delay no less than the base delay", ErrInvalidOption, o.maxAttempts, o.retryBase, o.retryMax)
	case o.refreshCheckPeriod <= 0:
		return fmt.Errorf("%w: withRefreshCheckPeriod(%v): want more than 0", ErrInvalidOption, o.refreshCheckPeriod)
	case o.clock == nil:
		return fmt.Errorf("%w: withClock(nil): want a clock", ErrInvalidOption)
	}
	return nil
}

// WithWorkers sets how many requests run in parallel (default DefaultWorkers):
// the bound on parallel pulls. n below 1 is invalid (ErrInvalidOption).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithRequestTimeout sets the deadline of one attempt of one request
// (default 5 minutes). d must be more than 0 (ErrInvalidOption).
func WithRequestTimeout(d time.Duration) Option { return func(o *options) { o.requestTimeout = d } }

// WithRetries sets how many attempts a request gets when it fails with a
// transient error (default 4), and the per-image exponential backoff between
// them (defaults 1 second and 2 minutes). maxAttempts below 1, base not more
// than 0 and max below base are invalid (ErrInvalidOption).
func WithRetries(maxAttempts int, base, max time.Duration) Option {
	return func(o *options) { o.maxAttempts, o.retryBase, o.retryMax = maxAttempts, base, max }
}

// withClock injects the clock used for timestamps, durations and periodic
// refresh (default the real clock). Retry backoff and request deadlines use
// real time. A nil clock is invalid (ErrInvalidOption).
func withClock(c clock.WithTicker) Option { return func(o *options) { o.clock = c } }

// withRefreshCheckPeriod sets how often Run looks for caches due for a
// periodic refresh (default 10 seconds). d must be more than 0
// (ErrInvalidOption).
func withRefreshCheckPeriod(d time.Duration) Option {
	return func(o *options) { o.refreshCheckPeriod = d }
}

// WithStateDir persists the applied caches and unfinished work in dir, so a
// new manager on the same dir resumes it. Without it (or with "") nothing is
// persisted.
func WithStateDir(dir string) Option { return func(o *options) { o.stateDir = dir } }

// WithNode sets the node name and container runtime version put into
// requests.
func WithNode(name, containerRuntimeVersion string) Option {
	return func(o *options) { o.node, o.runtimeVersion = name, containerRuntimeVersion }
}

// WithResultHandler receives every final ImageWorkResult. It is called from
// the manager's goroutines without any lock held, so it may call the manager;
// it should return quickly. nil, the default, means no handler.
func WithResultHandler(f func(ImageWorkResult)) Option { return func(o *options) { o.onResult = f } }

// WithStatusHandler receives each batch's CacheStatus when the batch
// completes (the statusupdate), after the handler got the batch's results.
// nil, the default, means no handler.
func WithStatusHandler(f func(CacheStatus)) Option { return func(o *options) { o.onStatus = f } }

package imagecache

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/pullmanager"
)

// Manager keeps declared image caches present on the node. Create it with
// New, feed it with Apply, Delete and Refresh, and drain its work with Run.
type Manager struct {
	logger klog.Logger
	images ImageService
	// pulls is nil in ModeStandalone.
	pulls   pullmanager.ImagePullManager
	opts    options
	clock   clock.WithTicker
	queue   workqueue.TypedRateLimitingInterface[string]
	metrics *metrics

	emitMu sync.Mutex // held while handlers run; see flush

	mu      sync.Mutex
	caches  map[CacheRef]*cacheState
	entries map[string]*entry // by image
	latest  map[CacheRef]*batch
	// lastStatus is the last completed status of each cache (completedStatus).
	lastStatus map[CacheRef]CacheStatus
	removals   map[pendingRemoval]struct{}
	outbox     []event
	nextBatch  uint64
	started    bool
	stopped    bool
}

type cacheState struct {
	spec        ImageCache
	generation  uint64
	completed   uint64
	pendingType WorkType
	open        int  // batches of this run for the cache that have not finished
	interrupted bool // one of them ended with requests cut off by shutdown
	lastRefresh time.Time
}

// New returns an in-process manager (ModeInProcess) over the image service
// and the pull manager: every pull is recorded through pulls, so pulls must
// sit on the pull records this process owns: a pullmanager.PullManager over
// an fsstore.Store opened writable (which holds the store's lock), as a
// kubelet built on this library has. Caches may have pull secrets. With
// WithStateDir it loads the applied caches and queues the work a previous
// manager left unfinished; that work runs once Run is called.
//
// A process beside a kubelet it does not control uses NewStandalone.
func New(logger klog.Logger, images ImageService, pulls pullmanager.ImagePullManager, opts ...Option) (*Manager, error) {
	if pulls == nil {
		return nil, fmt.Errorf("%w: nil pull manager (use NewStandalone for a manager that records nothing)", ErrInvalidOption)
	}
	return newManager(logger, images, pulls, opts)
}

// NewStandalone returns a manager without a pull manager (ModeStandalone),
// for a process beside a kubelet it does not control: it pulls through the
// image service anonymously only, writes no pull record and no intent (the
// kubelet would not see them while it runs), and treats an image the runtime
// has as already pulled. Apply refuses a cache with a pull secret with a
// *PrivateImageError; such a cache found in the state directory stays applied
// but each of its pulls fails with ReasonPrivateImage. Removals work as in
// New, without pruning records.
//
// An anonymously pulled image leaks nothing: every pod could pull it.
func NewStandalone(logger klog.Logger, images ImageService, opts ...Option) (*Manager, error) {
	return newManager(logger, images, nil, opts)
}

func newManager(logger klog.Logger, images ImageService, pulls pullmanager.ImagePullManager, opts []Option) (*Manager, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if images == nil {
		return nil, fmt.Errorf("%w: nil image service", ErrInvalidOption)
	}
	m := &Manager{
		logger:     logger,
		images:     images,
		pulls:      pulls,
		opts:       o,
		clock:      o.clock,
		caches:     map[CacheRef]*cacheState{},
		entries:    map[string]*entry{},
		latest:     map[CacheRef]*batch{},
		lastStatus: map[CacheRef]CacheStatus{},
		removals:   map[pendingRemoval]struct{}{},
	}
	m.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.retryBase, o.retryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: ""},
	)
	m.metrics = newMetrics(func() float64 { return float64(m.queue.Len()) })
	if o.stateDir != "" {
		if err := m.load(); err != nil {
			m.queue.ShutDown()
			return nil, err
		}
	}
	m.flush()
	return m, nil
}

// Mode reports whether the manager records its pulls (ModeInProcess) or not
// (ModeStandalone).
func (m *Manager) Mode() Mode {
	if m.pulls == nil {
		return ModeStandalone
	}
	return ModeInProcess
}

func sameSecret(a, b *PullSecret) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// minus returns the images of a that are not in b, in a's order.
func minus(a, b []string) []string {
	var out []string
	for _, img := range a {
		if !slices.Contains(b, img) {
			out = append(out, img)
		}
	}
	return out
}

// Apply makes cache the applied version of its namespace/name. A new cache
// queues a pull (create) of every image. A changed cache queues pulls
// (update) of the added images, or of all of them when the credentials or
// ForceFullCache changed, and removals (purge) of the dropped images unless
// another cache keeps them. The new version is persisted before Apply
// returns; results come later, one per request, and a CacheStatus when the
// batch completes. A standalone manager refuses a cache with a pull secret
// with a *PrivateImageError, changing nothing.
func (m *Manager) Apply(ctx context.Context, cache ImageCache) error {
	c, err := normalize(cache)
	if err != nil {
		return err
	}
	if m.pulls == nil && c.PullSecret != nil {
		return privateImageError(c)
	}
	ref := c.Ref()
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return ErrShutDown
	}
	old := m.caches[ref]
	var wt WorkType
	var pulls, drops []string
	if old == nil {
		wt, pulls = WorkTypeCreate, c.Images
	} else {
		wt = WorkTypeUpdate
		if !sameSecret(old.spec.PullSecret, c.PullSecret) || old.spec.ForceFullCache != c.ForceFullCache {
			pulls = c.Images
		} else {
			pulls = minus(c.Images, old.spec.Images)
		}
		drops = minus(old.spec.Images, c.Images)
	}

	cs := old
	var saved cacheState
	if cs == nil {
		cs = &cacheState{lastRefresh: m.clock.Now()}
		m.caches[ref] = cs
	} else {
		saved = *cs
	}
	cs.spec, cs.pendingType = c, wt
	cs.generation++
	added := m.addRemovalsLocked(ref, WorkTypePurge, drops)
	if err := m.saveLocked(); err != nil {
		if old == nil {
			delete(m.caches, ref)
		} else {
			*cs = saved
		}
		m.dropRemovalsLocked(added)
		m.mu.Unlock()
		return err
	}
	removals := make([]ImageWorkRequest, 0, len(drops))
	for _, img := range drops {
		removals = append(removals, m.newRequest(img, WorkTypePurge, false, ref))
	}
	klog.FromContext(ctx).V(2).Info("Applied image cache", "cache", ref, "workType", wt, "pulls", len(pulls), "removals", len(drops))
	m.enqueueLocked(ref, wt, cs, m.pullRequests(ref, wt, c, pulls), removals)
	m.mu.Unlock()
	m.flush()
	return nil
}

// appliedLocked returns the applied cache ref, or ErrShutDown after Run
// ended, or ErrCacheNotFound. m.mu must be held.
func (m *Manager) appliedLocked(ref CacheRef) (*cacheState, error) {
	if m.stopped {
		return nil, ErrShutDown
	}
	cs := m.caches[ref]
	if cs == nil {
		return nil, fmt.Errorf("%w: %s", ErrCacheNotFound, ref)
	}
	return cs, nil
}

// Delete forgets the cache and queues the removal (delete) of each of its
// images that no other cache keeps. A purge removes the image through the
// CRI and, when the pull manager can prune records, its pulled record.
func (m *Manager) Delete(ctx context.Context, namespace, name string) error {
	ref := CacheRef{Namespace: namespace, Name: name}
	m.mu.Lock()
	cs, err := m.appliedLocked(ref)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	delete(m.caches, ref)
	added := m.addRemovalsLocked(ref, WorkTypeDelete, cs.spec.Images)
	reqs := make([]ImageWorkRequest, 0, len(cs.spec.Images))
	for _, img := range cs.spec.Images {
		reqs = append(reqs, m.newRequest(img, WorkTypeDelete, false, ref))
	}
	if err := m.saveLocked(); err != nil {
		m.caches[ref] = cs
		m.dropRemovalsLocked(added)
		m.mu.Unlock()
		return err
	}
	klog.FromContext(ctx).V(2).Info("Deleted image cache", "cache", ref, "images", len(reqs))
	m.enqueueLocked(ref, WorkTypeDelete, nil, nil, reqs)
	m.mu.Unlock()
	m.flush()
	return nil
}

// Refresh queues a refresh of every image of the cache: each one missing, or
// not recorded for the cache's credentials, is pulled again.
func (m *Manager) Refresh(ctx context.Context, namespace, name string) error {
	ref := CacheRef{Namespace: namespace, Name: name}
	m.mu.Lock()
	cs, err := m.appliedLocked(ref)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.refreshLocked(ref, cs)
	m.mu.Unlock()
	m.flush()
	return nil
}

// Caches returns the applied caches, sorted by namespace/name.
func (m *Manager) Caches() []ImageCache {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ImageCache, 0, len(m.caches))
	for _, cs := range m.caches {
		c := cs.spec
		c.Images = slices.Clone(c.Images)
		if c.PullSecret != nil {
			s := *c.PullSecret
			c.PullSecret = &s
		}
		out = append(out, c)
	}
	sortCaches(out)
	return out
}

func sortCaches(caches []ImageCache) {
	sort.Slice(caches, func(i, j int) bool { return caches[i].Ref().String() < caches[j].Ref().String() })
}

// Status returns the progress of the latest batch queued for the cache in
// this manager's lifetime, and false if there was none.
func (m *Manager) Status(namespace, name string) (CacheStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.latest[CacheRef{Namespace: namespace, Name: name}]
	if b == nil {
		return CacheStatus{}, false
	}
	return b.status(), true
}

// Run works the queue with the configured number of workers until ctx is
// done, and runs periodic refreshes. When ctx is done it stops taking work:
// requests still queued, waiting for a retry, or cut off mid-call end with
// StatusUnknown and reason ShutDown (their intents are cleared through
// RecordImagePullFailed), and their caches stay pending in the state
// directory so the next manager resumes them. Run can be called once; it
// returns nil after a clean shutdown.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return ErrAlreadyRunning
	}
	m.started = true
	m.mu.Unlock()
	logger := m.logger
	logger.Info("Starting image cache manager", "workers", m.opts.workers)

	var wg sync.WaitGroup
	for range m.opts.workers {
		wg.Go(func() {
			for m.processNext(ctx) {
			}
		})
	}
	wg.Go(func() { m.refreshLoop(ctx) })
	<-ctx.Done()
	m.queue.ShutDown()
	wg.Wait()

	m.mu.Lock()
	m.stopped = true
	images := make([]string, 0, len(m.entries))
	for img := range m.entries {
		images = append(images, img)
	}
	sort.Strings(images)
	now := m.clock.Now()
	for _, img := range images {
		e := m.entries[img]
		waiting := e.waiting
		e.waiting = nil
		for _, r := range waiting {
			m.finishLocked(r, m.resultFor(r, now, outcome{status: StatusUnknown, reason: ReasonShutDown,
				message: "The manager shut down before the work ran"}), false)
		}
	}
	m.mu.Unlock()
	m.flush()
	logger.Info("Stopped image cache manager")
	return nil
}

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

// ImageService is the part of a container runtime's image service the
// manager uses; *cri.ImageService implements it, and so can a runtime shim's
// own client. Its errors are classified by the methods described at
// IsTransient, IsUnauthorized and IsTimeout.
type ImageService interface {
	// ImageStatus returns the image the runtime resolves image to, or nil
	// when the runtime does not have it.
	ImageStatus(ctx context.Context, image string) (*pullmanager.Image, error)
	// PullImage pulls image with the registry credential auth (nil for an
	// anonymous pull) and returns its imageRef. The manager sets only
	// Username and Password.
	PullImage(ctx context.Context, image string, auth *pullmanager.AuthConfig) (string, error)
	// RemoveImage removes image; removing an absent image is not an error.
	RemoveImage(ctx context.Context, image string) error
}

// RecordPruner is implemented by pull managers that can delete the pulled
// record of an image the caller removed (*pullmanager.PullManager does): under
// the record's lock, and only if imageGone still says the runtime lacks the
// image. A purge uses it; without it records are left to the kubelet's image
// garbage collection.
type RecordPruner interface {
	PruneImagePulledRecord(ctx context.Context, imageRef string, imageGone func(context.Context) (bool, error)) error
}

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

	mu        sync.Mutex
	caches    map[CacheRef]*cacheState
	entries   map[string]*entry // by image
	latest    map[CacheRef]*batch
	purges    map[persistedPurge]struct{}
	outbox    []event
	nextBatch uint64
	started   bool
	stopped   bool
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

type request struct {
	req      ImageWorkRequest
	batch    *batch
	index    int
	attempts int
	started  time.Time
}

func (r *request) removes() bool {
	return r.req.WorkType == WorkTypePurge || r.req.WorkType == WorkTypeDelete
}

type entry struct {
	waiting  []*request
	inFlight int
}

type batch struct {
	id        uint64
	ref       CacheRef
	workType  WorkType
	cache     *cacheState // nil for batches of a deleted cache
	started   time.Time
	finished  time.Time
	results   []ImageWorkResult
	done      []bool
	remaining int
	inFlight  int
	shutdown  bool
}

type event struct {
	result *ImageWorkResult
	status *CacheStatus
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
		logger:  logger,
		images:  images,
		pulls:   pulls,
		opts:    o,
		clock:   o.clock,
		caches:  map[CacheRef]*cacheState{},
		entries: map[string]*entry{},
		latest:  map[CacheRef]*batch{},
		purges:  map[persistedPurge]struct{}{},
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

// load reads the state directory and queues unfinished work.
func (m *Manager) load() error {
	p, err := readState(m.opts.stateDir)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	for _, pc := range p.Caches {
		c, err := pc.spec()
		if err != nil {
			return err
		}
		cs := &cacheState{spec: c, generation: pc.Generation, completed: pc.Completed, pendingType: pc.PendingWorkType, lastRefresh: now}
		m.caches[c.Ref()] = cs
	}
	for _, pp := range p.Purges {
		m.purges[pp] = struct{}{}
	}
	// Resume, in the order the file lists them.
	for _, pc := range p.Caches {
		ref := CacheRef{Namespace: pc.Namespace, Name: pc.Name}
		cs := m.caches[ref]
		if cs.completed >= cs.generation {
			continue
		}
		wt := cs.pendingType
		if wt == "" {
			wt = WorkTypeCreate
		}
		m.logger.Info("Resuming unfinished image cache work", "cache", ref, "workType", wt, "images", len(cs.spec.Images))
		m.enqueueLocked(ref, wt, cs, m.pullRequests(ref, wt, cs.spec, cs.spec.Images), nil)
	}
	type purgeBatchKey struct {
		ref CacheRef
		wt  WorkType
	}
	var order []purgeBatchKey
	groups := map[purgeBatchKey][]ImageWorkRequest{}
	for _, pp := range p.Purges {
		k := purgeBatchKey{CacheRef{pp.Namespace, pp.Name}, pp.WorkType}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m.newRequest(pp.Image, pp.WorkType, false, k.ref))
	}
	for _, k := range order {
		m.logger.Info("Resuming unfinished image removals", "cache", k.ref, "workType", k.wt, "images", len(groups[k]))
		m.enqueueLocked(k.ref, k.wt, nil, nil, groups[k])
	}
	return nil
}

func normalize(c ImageCache) (ImageCache, error) {
	if c.Namespace == "" || c.Name == "" {
		return c, fmt.Errorf("%w: namespace and name are required", ErrInvalidCache)
	}
	seen := make(map[string]bool, len(c.Images))
	images := make([]string, 0, len(c.Images))
	for _, img := range c.Images {
		if img == "" {
			return c, fmt.Errorf("%w: %s: empty image", ErrInvalidCache, c.Ref())
		}
		if !seen[img] {
			seen[img] = true
			images = append(images, img)
		}
	}
	c.Images = images
	if c.PullSecret != nil {
		s := *c.PullSecret
		c.PullSecret = &s
	}
	if err := validatePullSecret(c.Ref(), c.PullSecret); err != nil {
		return c, err
	}
	if c.RefreshInterval < 0 {
		return c, fmt.Errorf("%w: %s: negative refresh interval", ErrInvalidCache, c.Ref())
	}
	return c, nil
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

func (m *Manager) newRequest(image string, wt WorkType, force bool, ref CacheRef) ImageWorkRequest {
	return ImageWorkRequest{Image: image, Node: m.opts.node, ContainerRuntimeVersion: m.opts.runtimeVersion,
		WorkType: wt, ForceFullCache: force, ImageCache: ref}
}

func (m *Manager) pullRequests(ref CacheRef, wt WorkType, spec ImageCache, images []string) []ImageWorkRequest {
	out := make([]ImageWorkRequest, 0, len(images))
	for _, img := range images {
		out = append(out, m.newRequest(img, wt, spec.ForceFullCache, ref))
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
	var added []persistedPurge
	for _, img := range drops {
		pp := persistedPurge{Image: img, Namespace: ref.Namespace, Name: ref.Name, WorkType: WorkTypePurge}
		if _, ok := m.purges[pp]; !ok {
			m.purges[pp] = struct{}{}
			added = append(added, pp)
		}
	}
	if err := m.saveLocked(); err != nil {
		if old == nil {
			delete(m.caches, ref)
		} else {
			*cs = saved
		}
		for _, pp := range added {
			delete(m.purges, pp)
		}
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
// CRI and, when the pull manager is a RecordPruner, its pulled record.
func (m *Manager) Delete(ctx context.Context, namespace, name string) error {
	ref := CacheRef{Namespace: namespace, Name: name}
	m.mu.Lock()
	cs, err := m.appliedLocked(ref)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	delete(m.caches, ref)
	var added []persistedPurge
	reqs := make([]ImageWorkRequest, 0, len(cs.spec.Images))
	for _, img := range cs.spec.Images {
		pp := persistedPurge{Image: img, Namespace: namespace, Name: name, WorkType: WorkTypeDelete}
		if _, ok := m.purges[pp]; !ok {
			m.purges[pp] = struct{}{}
			added = append(added, pp)
		}
		reqs = append(reqs, m.newRequest(img, WorkTypeDelete, false, ref))
	}
	if err := m.saveLocked(); err != nil {
		m.caches[ref] = cs
		for _, pp := range added {
			delete(m.purges, pp)
		}
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

func (m *Manager) refreshLocked(ref CacheRef, cs *cacheState) {
	cs.lastRefresh = m.clock.Now()
	m.enqueueLocked(ref, WorkTypeRefresh, cs, m.pullRequests(ref, WorkTypeRefresh, cs.spec, cs.spec.Images), nil)
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

func (b *batch) status() CacheStatus {
	s := CacheStatus{
		ImageCache: b.ref, WorkType: b.workType, Batch: b.id, Complete: b.remaining == 0,
		Started: b.started, Finished: b.finished, Requests: len(b.results),
		InFlight: b.inFlight, Queued: b.remaining - b.inFlight, Counts: map[ImageWorkStatus]int{},
	}
	for i, r := range b.results {
		if b.done[i] {
			s.Counts[r.Status]++
			s.Results = append(s.Results, r)
		}
	}
	if b.inFlight > 0 {
		s.Counts[StatusJobCreated] = b.inFlight
	}
	if s.Complete {
		s.Duration = b.finished.Sub(b.started)
	}
	return s
}

// enqueueLocked creates a batch of pull and removal requests and queues them.
func (m *Manager) enqueueLocked(ref CacheRef, wt WorkType, cs *cacheState, pulls, removals []ImageWorkRequest) {
	m.nextBatch++
	reqs := append(slices.Clip(pulls), removals...)
	b := &batch{id: m.nextBatch, ref: ref, workType: wt, cache: cs, started: m.clock.Now(),
		results: make([]ImageWorkResult, len(reqs)), done: make([]bool, len(reqs)), remaining: len(reqs)}
	m.latest[ref] = b
	if cs != nil {
		cs.open++
	}
	if len(reqs) == 0 {
		m.completeLocked(b)
		return
	}
	for i, req := range reqs {
		b.results[i] = ImageWorkResult{Request: req}
		e := m.entries[req.Image]
		if e == nil {
			e = &entry{}
			m.entries[req.Image] = e
		}
		e.waiting = append(e.waiting, &request{req: req, batch: b, index: i})
		m.queue.Add(req.Image)
	}
}

// finishLocked records the final result of r.
func (m *Manager) finishLocked(r *request, res ImageWorkResult, wasInFlight bool) {
	b := r.batch
	b.results[r.index] = res
	b.done[r.index] = true
	b.remaining--
	if wasInFlight {
		b.inFlight--
		if e := m.entries[r.req.Image]; e != nil {
			e.inFlight--
		}
	}
	if e := m.entries[r.req.Image]; e != nil && e.inFlight == 0 && len(e.waiting) == 0 {
		delete(m.entries, r.req.Image)
	}
	if res.Reason == ReasonShutDown {
		b.shutdown = true
	} else if r.removes() {
		delete(m.purges, persistedPurge{Image: r.req.Image, Namespace: r.req.ImageCache.Namespace, Name: r.req.ImageCache.Name, WorkType: r.req.WorkType})
	}
	m.metrics.results.WithLabelValues(string(res.Request.WorkType), string(res.Status)).Inc()
	m.outbox = append(m.outbox, event{result: &res})
	if b.remaining == 0 {
		m.completeLocked(b)
	}
}

// completeLocked publishes the batch's status and persists its completion.
func (m *Manager) completeLocked(b *batch) {
	b.finished = m.clock.Now()
	st := b.status()
	m.outbox = append(m.outbox, event{status: &st})
	if cs := b.cache; cs != nil {
		cs.open--
		if b.shutdown {
			cs.interrupted = true
		}
		if cs.open == 0 && !cs.interrupted && cs.completed < cs.generation && m.caches[b.ref] == cs {
			cs.completed = cs.generation
		}
	}
	if err := m.saveLocked(); err != nil {
		m.logger.Error(err, "Failed to persist image cache state", "cache", b.ref)
	}
}

func (m *Manager) saveLocked() error {
	if m.opts.stateDir == "" {
		return nil
	}
	p := &persisted{Version: stateVersion}
	refs := make([]CacheRef, 0, len(m.caches))
	for ref := range m.caches {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	for _, ref := range refs {
		cs := m.caches[ref]
		p.Caches = append(p.Caches, persistedCache{
			Namespace: ref.Namespace, Name: ref.Name, Images: cs.spec.Images, ForceFullCache: cs.spec.ForceFullCache,
			PullSecret: cs.spec.PullSecret, RefreshInterval: cs.spec.RefreshInterval,
			Generation: cs.generation, Completed: cs.completed, PendingWorkType: cs.pendingType,
		})
	}
	for pp := range m.purges {
		p.Purges = append(p.Purges, pp)
	}
	sort.Slice(p.Purges, func(i, j int) bool {
		a, b := p.Purges[i], p.Purges[j]
		if a.Namespace+"/"+a.Name != b.Namespace+"/"+b.Name {
			return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
		}
		if a.WorkType != b.WorkType {
			return a.WorkType < b.WorkType
		}
		return a.Image < b.Image
	})
	return writeState(m.opts.stateDir, p)
}

// flush hands queued events to the handlers, in the order they happened. One
// goroutine at a time runs handlers; a flush that finds another one running
// leaves its events to it.
func (m *Manager) flush() {
	for {
		if !m.emitMu.TryLock() {
			return
		}
		for {
			m.mu.Lock()
			out := m.outbox
			m.outbox = nil
			m.mu.Unlock()
			if len(out) == 0 {
				break
			}
			for _, ev := range out {
				switch {
				case ev.result != nil && m.opts.onResult != nil:
					m.opts.onResult(*ev.result)
				case ev.status != nil && m.opts.onStatus != nil:
					m.opts.onStatus(*ev.status)
				}
			}
		}
		m.emitMu.Unlock()
		m.mu.Lock()
		empty := len(m.outbox) == 0
		m.mu.Unlock()
		if empty {
			return
		}
	}
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

func (m *Manager) refreshLoop(ctx context.Context) {
	t := m.clock.NewTicker(m.opts.refreshCheckPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.refreshDue()
		}
	}
}

func (m *Manager) refreshDue() {
	m.mu.Lock()
	now := m.clock.Now()
	refs := make([]CacheRef, 0)
	for ref, cs := range m.caches {
		if iv := cs.spec.RefreshInterval; iv > 0 && !now.Before(cs.lastRefresh.Add(iv)) {
			refs = append(refs, ref)
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	for _, ref := range refs {
		m.logger.V(2).Info("Refreshing image cache", "cache", ref)
		m.refreshLocked(ref, m.caches[ref])
	}
	m.mu.Unlock()
	m.flush()
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// DefaultResyncInterval is Config.ResyncInterval's default.
const DefaultResyncInterval = 60 * time.Second

// FieldManager is the server-side apply field manager of the agent's
// writes: it owns status.agent and status.images, nothing else.
const FieldManager = "pullrecords-agent"

// Retry delays after a failed round (runtime unreachable, write refused);
// never longer than the resync interval.
const (
	minRetryDelay = time.Second
	maxRetryDelay = 30 * time.Second
)

// Runtime is the part of the container runtime the agent uses;
// *cri.ImageService satisfies it.
type Runtime interface {
	// ImageStatus returns the image the runtime resolves image to, or nil
	// when it does not have it.
	ImageStatus(ctx context.Context, image string) (*imageruntime.Image, error)
	// RemoveImage removes image; an absent image is not an error.
	RemoveImage(ctx context.Context, image string) error
	// ImageFsInfo returns the runtime's image filesystems.
	ImageFsInfo(ctx context.Context) ([]cri.FilesystemUsage, error)
	// RuntimeVersion returns "<runtime_name>://<runtime_version>".
	RuntimeVersion(ctx context.Context) (string, error)
}

var _ Runtime = (*cri.ImageService)(nil)

// Config configures an Agent.
type Config struct {
	// NodeName is the node the agent runs on: the name of its NodeImages.
	// Required; a valid object name (DNS subdomain).
	NodeName string
	// Dynamic is the client for NodeImages. Required.
	Dynamic dynamic.Interface
	// Runtime is the node's container runtime. Required.
	Runtime Runtime
	// Guard answers the checks made right before a removal (the image's
	// tags and pin, the containers' images): NewCRIGuard over the runtime's
	// connection. Required.
	Guard Guard
	// ResyncInterval is the heartbeat and full re-check period; zero means
	// DefaultResyncInterval, negative is invalid.
	ResyncInterval time.Duration
	// ImageFsPath, if set, is the path whose filesystem's size is reported
	// as imageFsTotalBytes (a host path mounted into the agent's pod);
	// otherwise the mountpoint the runtime's ImageFsInfo reports.
	ImageFsPath string
	// Metrics, if set, counts the agent's work (NewMetrics; register it
	// with a registry of your own). Nil counts nothing.
	Metrics *Metrics
	// Clock is the agent's clock (heartbeats, resync, retries); nil means
	// the real clock.
	Clock clock.WithTicker
}

// Agent reports one node's image presence into its NodeImages status and
// removes the images the spec's purge list names. Create it with New.
type Agent struct {
	node    string
	dyn     dynamic.ResourceInterface
	dynAll  dynamic.Interface
	rt      Runtime
	guard   Guard
	resync  time.Duration
	fsPath  string
	clock   clock.WithTicker
	metrics *Metrics
	running atomic.Bool
	// lastGood is the clock time (Unix ns) of the latest good round, or of
	// Run's start before the first (health.go).
	lastGood atomic.Int64

	// State of the Run goroutine only.
	removeErrors   map[string]string // purge image -> latest RemoveImage error
	runtimeVersion string            // latest successful answer
	lastWrite      time.Time         // clock time of the latest successful write
	lastReport     agentReport       // what it wrote (heartbeat aside)
	lastUID        types.UID         // into which object
	retryDelay     time.Duration     // latest retry delay; 0 after a good round

	// afterRound, if set (tests), is called at the end of every round with
	// the resourceVersion of the object the round worked on ("" when there
	// was none) and whether it wrote the status.
	afterRound func(resourceVersion string, wrote bool)
}

// New checks cfg and returns an Agent. A bad Config is ErrInvalidConfig,
// wrapped with the field and value at fault.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.NodeName == "":
		return nil, fmt.Errorf("%w: NodeName is empty", ErrInvalidConfig)
	case cfg.Dynamic == nil:
		return nil, fmt.Errorf("%w: Dynamic is nil", ErrInvalidConfig)
	case cfg.Runtime == nil:
		return nil, fmt.Errorf("%w: Runtime is nil", ErrInvalidConfig)
	case cfg.Guard == nil:
		return nil, fmt.Errorf("%w: Guard is nil", ErrInvalidConfig)
	case cfg.ResyncInterval < 0:
		return nil, fmt.Errorf("%w: ResyncInterval %v: want 0 (default %v) or more", ErrInvalidConfig, cfg.ResyncInterval, DefaultResyncInterval)
	}
	if errs := validation.IsDNS1123Subdomain(cfg.NodeName); len(errs) > 0 {
		return nil, fmt.Errorf("%w: NodeName %q: %v", ErrInvalidConfig, cfg.NodeName, errs)
	}
	a := &Agent{
		node:         cfg.NodeName,
		dyn:          cfg.Dynamic.Resource(api.NodeImagesResource),
		dynAll:       cfg.Dynamic,
		rt:           cfg.Runtime,
		guard:        cfg.Guard,
		resync:       cfg.ResyncInterval,
		fsPath:       cfg.ImageFsPath,
		clock:        cfg.Clock,
		metrics:      cfg.Metrics,
		removeErrors: map[string]string{},
	}
	if a.resync == 0 {
		a.resync = DefaultResyncInterval
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	return a, nil
}

// Run watches the node's NodeImages and keeps its agent status current
// until ctx is done; it then returns nil. Failures (an unreachable runtime,
// a refused write) are logged and retried; they never end Run. A second Run
// while one is running returns ErrAlreadyRunning.
func (a *Agent) Run(ctx context.Context) error {
	if a.running.Swap(true) {
		return ErrAlreadyRunning
	}
	defer a.running.Store(false)
	a.markGood() // the grace of Healthy until the first round
	logger := klog.FromContext(ctx).WithName("agent").WithValues("node", a.node)
	ctx = klog.NewContext(ctx, logger)

	// Only this node's object: the field selector makes the API server
	// send nothing else, whatever the client may read.
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(a.dynAll, 0, "", func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.node).String()
	})
	informer := factory.ForResource(api.NodeImagesResource).Informer()
	trigger := make(chan struct{}, 1)
	signal := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	}); err != nil {
		return fmt.Errorf("agent: watching NodeImages: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	logger.V(2).Info("Waiting for the NodeImages informer")
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil
	}
	logger.Info("Agent running", "resyncInterval", a.resync)

	// One timer: the next resync after a round that worked, a retry (with
	// backoff, never later than the resync) after one that failed. Changes
	// of the object start a round at once.
	signal()
	next := a.clock.NewTimer(a.resync)
	defer func() { next.Stop() }()
	for {
		select {
		case <-ctx.Done():
			logger.Info("Agent stopping")
			return nil
		case <-trigger:
		case <-next.C():
		}
		next.Stop()
		ok := a.round(ctx, informer.GetStore())
		delay := a.resync
		if ok {
			a.retryDelay = 0
			a.markGood()
		} else {
			a.retryDelay = min(max(2*a.retryDelay, minRetryDelay), maxRetryDelay, a.resync)
			delay = a.retryDelay
		}
		next = a.clock.NewTimer(delay)
	}
}

// round re-checks every image of the node's NodeImages, removes the purge
// images present, and writes the status if it changed or the heartbeat is
// due. It returns false when the round failed as a whole (runtime
// unreachable, write failed) and should be retried soon.
func (a *Agent) round(ctx context.Context, store cache.Store) (ok bool) {
	logger := klog.FromContext(ctx)
	wrote, rv := false, ""
	defer func() {
		if a.afterRound != nil {
			a.afterRound(rv, wrote)
		}
	}()
	item, exists, err := store.GetByKey(a.node)
	if err != nil || !exists {
		logger.V(2).Info("No NodeImages for this node yet; waiting for the controller to create it")
		return true
	}
	u, isU := item.(*unstructured.Unstructured)
	if !isU {
		logger.Error(nil, "Unexpected object in the NodeImages informer", "type", fmt.Sprintf("%T", item))
		return true
	}
	rv = u.GetResourceVersion()
	var obj api.NodeImages
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		logger.Error(err, "Cannot decode NodeImages; waiting for a change")
		return true
	}

	status, err := a.observe(ctx, &obj)
	if err != nil {
		logger.Error(err, "Container runtime unreachable; retrying")
		a.metrics.failed(stageRuntime)
		return false
	}
	// Unchanged: the object says it already, or the agent wrote it into
	// this very object (another writer's entries in status.images, which
	// the agent's apply cannot remove, must not make it write every round).
	unchanged := sameReport(status, obj.Status) ||
		(obj.UID == a.lastUID && reflect.DeepEqual(status, a.lastReport))
	if unchanged && !a.lastWrite.IsZero() && a.clock.Since(a.lastWrite) < a.resync {
		logger.V(4).Info("Status unchanged; heartbeat not due", "generation", obj.Generation)
		return true
	}
	now := a.clock.Now()
	write := status
	write.Agent.HeartbeatTime = metav1.NewTime(now)
	if err := a.apply(ctx, write); err != nil {
		logger.Error(err, "Writing NodeImages status failed; retrying")
		a.metrics.failed(stageWrite)
		return false
	}
	a.metrics.reported(now)
	a.lastWrite, a.lastReport, a.lastUID = now, status, obj.UID
	wrote = true
	logger.V(2).Info("Wrote NodeImages status", "generation", obj.Generation, "images", len(status.Images))
	return true
}

// observe asks the runtime about every image of obj's spec, removes the
// purge images present, and returns the agent's part of the status (without
// heartbeat). An error means the runtime is unreachable (its image service
// does not answer ImageFsInfo, or a call says Unavailable).
func (a *Agent) observe(ctx context.Context, obj *api.NodeImages) (agentReport, error) {
	logger := klog.FromContext(ctx)
	fs, err := a.rt.ImageFsInfo(ctx)
	if err != nil {
		return agentReport{}, err
	}
	if v, err := a.rt.RuntimeVersion(ctx); err != nil {
		if unreachable(err) {
			return agentReport{}, err
		}
		logger.Error(err, "Runtime version unknown; reporting the last one known", "runtimeVersion", a.runtimeVersion)
	} else {
		a.runtimeVersion = v
	}
	rep := agentReport{
		Agent: api.AgentStatus{
			ObservedGeneration: obj.Generation,
			RuntimeVersion:     a.runtimeVersion,
		},
		Images: []api.ImagePresence{},
	}
	a.fillFs(ctx, &rep.Agent, fs)

	// Wanted images first: their presence, and the IDs they resolve to,
	// which no purge may remove.
	keep := map[string]bool{}
	keepIDs := map[string]bool{}
	for _, img := range obj.Spec.Images {
		if img.Image == "" || keep[img.Image] {
			continue
		}
		keep[img.Image] = true
		p, err := a.presence(ctx, img.Image)
		if err != nil {
			if unreachable(err) {
				return agentReport{}, err
			}
			logger.Error(err, "Image status unknown this round; left out of the report", "image", img.Image)
			// Unknown: no purge may take what it might resolve to.
			rep.Unknown = true
			continue
		}
		if p.Present {
			keepIDs[p.ImageRef] = true
		}
		rep.Images = append(rep.Images, p)
	}
	var purge []api.NodeImage
	purging := map[string]bool{}
	for _, img := range obj.Spec.Purge {
		if img.Image == "" || keep[img.Image] || purging[img.Image] {
			continue // keeping wins
		}
		purging[img.Image] = true
		purge = append(purge, img)
	}
	// Forget errors of images no longer to purge.
	for img := range a.removeErrors {
		if !purging[img] {
			delete(a.removeErrors, img)
		}
	}
	if rep.Unknown {
		// A wanted image could not be resolved: a removal could take it.
		// Remove nothing and leave the purge entries out of the report, so
		// nobody reads them as done.
		logger.Info("Not purging this round: a wanted image's status is unknown", "purge", len(purge))
		return rep, nil
	}
	purged, err := a.purge(ctx, purge, keepIDs)
	if err != nil {
		return agentReport{}, err
	}
	rep.Images = append(rep.Images, purged...)
	return rep, nil
}

// presence is the runtime's exact answer for image.
func (a *Agent) presence(ctx context.Context, image string) (api.ImagePresence, error) {
	img, err := a.rt.ImageStatus(ctx, image)
	if err != nil {
		return api.ImagePresence{}, err
	}
	p := api.ImagePresence{Image: image}
	if img != nil {
		p.Present = true
		p.ImageRef = img.ID
		p.Size = clampInt64(img.Size)
	}
	return p, nil
}

// fillFs sets the image filesystem's used bytes (the runtime's first image
// filesystem, as the kubelet reports imageFs) and total bytes (statfs).
func (a *Agent) fillFs(ctx context.Context, st *api.AgentStatus, fs []cri.FilesystemUsage) {
	logger := klog.FromContext(ctx)
	path := a.fsPath
	if len(fs) > 0 {
		st.ImageFsUsedBytes = clampInt64(fs[0].UsedBytes)
		if path == "" {
			path = fs[0].Mountpoint
		}
	}
	if path == "" {
		return
	}
	total, err := filesystemSize(path)
	if err != nil {
		logger.V(2).Info("Image filesystem size unknown", "path", path, "err", err)
		return
	}
	st.ImageFsTotalBytes = clampInt64(total)
}

func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}

// unreachable reports whether err means the runtime cannot be reached at
// all (rather than a failure about one image).
func unreachable(err error) bool {
	var ce *cri.CallError
	if errors.As(err, &ce) {
		return ce.Code == codes.Unavailable
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unavailable {
		return true
	}
	return errors.Is(err, cri.ErrClosed)
}

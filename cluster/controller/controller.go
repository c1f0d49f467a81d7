package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cluster/api"
)

const (
	podsByCacheIndex = "byCache"
	podsByNodeIndex  = "byNode"
	fieldManager     = "pullrecords-controller"
)

// Controller turns ImageCaches into pre-pull pods and per-node results, and
// results into each ImageCache's status. See the package documentation.
type Controller struct {
	cfg Config

	kubeInformers informers.SharedInformerFactory
	podInformers  informers.SharedInformerFactory
	dynInformers  dynamicinformer.DynamicSharedInformerFactory

	caches     cache.GenericLister
	cacheView  *cacheView // caches, typed
	nodeImages cache.GenericLister
	nodes      corelisters.NodeLister
	pods       corelisters.PodLister
	podIndex   cache.Indexer
	synced     []cache.InformerSynced

	cacheQueue workqueue.TypedRateLimitingInterface[string]
	nodeQueue  workqueue.TypedRateLimitingInterface[string]

	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster

	mu sync.Mutex
	// pending holds results decided from pods but not yet written to their
	// node's NodeImages, by node then result key; the pods stay until the
	// write succeeds, so a restart decides them again from the pods.
	pending map[string]map[resultKey]pendingResult
	// created remembers pods created but not yet seen by the informer, so
	// the in-flight limits count them.
	created map[string]createdPod
	// records holds pull records (by node) not yet seen in the node's
	// spec; syncNode writes them there.
	records map[string]map[recordKey]api.PullRecord
	// statusWritten is when each cache's in-progress status was last
	// written: progress is written at most once per statusInterval.
	statusWritten map[string]time.Time
	// gone holds the UIDs of caches seen deleted (UID -> namespace/name)
	// until their pods are deleted: those pods stay the controller's.
	gone map[types.UID]string
	// refused remembers the Warning events sent for refused pre-pull pods.
	refused refusedEvents
	// deleted holds the UIDs of pods this controller deleted until the
	// informer sees them go, so that no pod is deleted twice (podwrite.go).
	deleted map[types.UID]bool

	health health // for Healthy (health.go)
}

type resultKey struct{ cache, image string }

type pendingResult struct {
	result api.NodeResult
	from   fromPod // the pre-pull pod it was read off, if any
}

type createdPod struct {
	node string
	at   time.Time
	// The pod's cache UID, batch and images, so that a sync before the
	// informer shows the pod does not plan its images again.
	cacheUID, batch string
	images          []string
}

// New builds a Controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:           cfg,
		pending:       map[string]map[resultKey]pendingResult{},
		created:       map[string]createdPod{},
		records:       map[string]map[recordKey]api.PullRecord{},
		statusWritten: map[string]time.Time{},
		gone:          map[types.UID]string{},
		deleted:       map[types.UID]bool{},
		cacheQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "imagecaches", Clock: cfg.Clock}),
		nodeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeimages", Clock: cfg.Clock}),
	}
	c.kubeInformers = informers.NewSharedInformerFactory(cfg.Kube, 0)
	c.podInformers = informers.NewSharedInformerFactoryWithOptions(cfg.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedByLabel + "=" + managedByValue }))
	c.dynInformers = dynamicinformer.NewDynamicSharedInformerFactory(cfg.Dynamic, 0)

	cacheInf := c.dynInformers.ForResource(api.ImageCacheResource)
	niInf := c.dynInformers.ForResource(api.NodeImagesResource)
	nodeInf := c.kubeInformers.Core().V1().Nodes()
	podInf := c.podInformers.Core().V1().Pods()
	if err := podInf.Informer().AddIndexers(cache.Indexers{
		podsByCacheIndex: func(obj any) ([]string, error) {
			// The controlling cache's namespace/name; a labelled pod no
			// ImageCache controls is indexed nowhere (see owned.go).
			if key := ownerKey(obj.(*corev1.Pod)); key != "" {
				return []string{key}, nil
			}
			return nil, nil
		},
		podsByNodeIndex: func(obj any) ([]string, error) {
			if pod := obj.(*corev1.Pod); ownerKey(pod) != "" {
				return []string{pod.Spec.NodeName}, nil
			}
			return nil, nil
		},
	}); err != nil {
		return nil, fmt.Errorf("pod indexers: %w", err)
	}
	c.caches = cacheInf.Lister()
	c.cacheView = newCacheView(c.caches)
	c.nodeImages = niInf.Lister()
	c.nodes = nodeInf.Lister()
	c.pods = podInf.Lister()
	c.podIndex = podInf.Informer().GetIndexer()
	c.synced = []cache.InformerSynced{cacheInf.Informer().HasSynced, niInf.Informer().HasSynced,
		nodeInf.Informer().HasSynced, podInf.Informer().HasSynced}

	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{cacheInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.cacheChanged(obj, true) },
			UpdateFunc: func(old, obj any) { c.cacheChanged(obj, generation(old) != generation(obj)) },
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if key, ok := objectKey(obj); ok {
					if m, ok := obj.(metav1.Object); ok {
						c.cacheGone(key, m.GetUID())
					}
				}
				c.cacheChanged(obj, true)
			},
		}},
		{niInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.nodeImagesChanged,
			UpdateFunc: func(_, obj any) { c.nodeImagesChanged(obj) },
		}},
		{nodeInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.nodeChanged,
			UpdateFunc: func(old, obj any) {
				if nodeMatters(old.(*corev1.Node), obj.(*corev1.Node)) {
					c.nodeChanged(obj)
				}
			},
			DeleteFunc: c.nodeChanged,
		}},
		{podInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.podChanged,
			UpdateFunc: func(_, obj any) { c.podChanged(obj) },
			DeleteFunc: c.podGone,
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("event handler: %w", err)
		}
	}
	c.broadcaster = record.NewBroadcaster()
	c.recorder = c.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "pullrecords-controller"})
	return c, nil
}

// Run runs the controller until ctx is done: it refuses to start while a
// kube-fledged controller runs, removes kube-fledged's leftover Jobs, starts
// the informers and the workers. Use RunWithLeaderElection to run several
// replicas.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	c.health.running.Store(true)
	c.cfg.Metrics.leading(true)
	defer func() {
		c.health.synced.Store(false)
		c.health.running.Store(false)
		c.cfg.Metrics.leading(false)
	}()
	if err := c.takeOverFromKubeFledged(ctx); err != nil {
		return err
	}
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.cfg.Kube.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	defer c.cacheQueue.ShutDown()
	defer c.nodeQueue.ShutDown()
	c.kubeInformers.Start(ctx.Done())
	c.podInformers.Start(ctx.Done())
	c.dynInformers.Start(ctx.Done())
	defer c.kubeInformers.Shutdown()
	defer c.podInformers.Shutdown()
	defer c.dynInformers.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil // stopped before it started: ctx is done
	}
	c.health.synced.Store(true)
	logger.Info("Controller started", "cacheWorkers", c.cfg.CacheWorkers, "nodeWorkers", c.cfg.NodeWorkers)
	var wg sync.WaitGroup
	for i := 0; i < c.cfg.CacheWorkers; i++ {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) { c.work(ctx, queueImageCaches, c.cacheQueue, c.syncCache) }, time.Second)
		})
	}
	for i := 0; i < c.cfg.NodeWorkers; i++ {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) { c.work(ctx, queueNodeImages, c.nodeQueue, c.syncNode) }, time.Second)
		})
	}
	<-ctx.Done()
	c.cacheQueue.ShutDown()
	c.nodeQueue.ShutDown()
	wg.Wait()
	logger.Info("Controller stopped")
	return nil
}

// work processes queue items until the queue shuts down. A sync that fails
// is retried with the queue's back-off; one that asks for a later look is
// added again after that delay.
func (c *Controller) work(ctx context.Context, name string, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) (time.Duration, error)) {
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		after, err := sync(ctx, key)
		c.cfg.Metrics.synced(name, err)
		switch {
		case err != nil:
			switch {
			case ctx.Err() != nil:
			case apierrors.IsConflict(err):
				// Another writer (the agent, a user, a replica) got there
				// first: routine, retried with fresh state.
				klog.FromContext(ctx).V(2).Info("Sync lost a write race; retrying", "key", key, "err", err)
			default:
				klog.FromContext(ctx).Error(err, "Sync failed; retrying", "key", key)
			}
			q.AddRateLimited(key)
		default:
			q.Forget(key)
			if after > 0 {
				q.AddAfter(key, after)
			}
		}
		q.Done(key)
	}
}

func generation(obj any) int64 {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.GetGeneration()
	}
	return 0
}

func objectKey(obj any) (string, bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return key, err == nil
}

// cacheChanged queues the cache, and every node when what it wants may
// have changed (created, deleted, spec or action changed).
func (c *Controller) cacheChanged(obj any, nodesToo bool) {
	key, ok := objectKey(obj)
	if !ok {
		return
	}
	c.cacheQueue.Add(key)
	if !nodesToo {
		// The action (purge, refresh) may change what the cache wants.
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if r, _, _ := unstructured.NestedString(u.Object, "status", "reason"); r != api.ReasonImageCachePurge {
				return
			}
		}
	}
	c.queueAllNodes()
}

func (c *Controller) queueAllNodes() {
	nodes, err := c.nodes.List(everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		c.nodeQueue.Add(n.Name)
	}
}

func (c *Controller) queueAllCaches() {
	objs, err := c.caches.List(everything())
	if err != nil {
		return
	}
	for _, o := range objs {
		if key, ok := objectKey(o); ok {
			c.cacheQueue.Add(key)
		}
	}
}

// nodeImagesChanged wakes the caches that wait on the node's report (those
// that want an image there or recorded a pull of one), and the node itself
// while it has purges: the agent's report of one ends it.
func (c *Controller) nodeImagesChanged(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var ni api.NodeImages
	if api.FromUnstructured(u, &ni) != nil {
		return
	}
	seen := map[string]bool{}
	wake := func(key string) {
		if !seen[key] {
			seen[key] = true
			c.cacheQueue.AddAfter(key, batchDelay)
		}
	}
	for _, list := range [][]api.NodeImage{ni.Spec.Images, ni.Spec.Purge} {
		for _, img := range list {
			for _, key := range img.Caches {
				wake(key)
			}
			for _, r := range img.Pulled {
				wake(r.Cache)
			}
		}
	}
	if len(ni.Spec.Purge) > 0 {
		c.nodeQueue.AddAfter(ni.Name, batchDelay)
	}
}

// nodeMatters reports whether a node update can change what caches want
// there or how they reach it: labels, images in status, runtime version,
// and what Placement looks at (cordon, taints, the Ready condition's
// status; not its heartbeats).
func nodeMatters(old, cur *corev1.Node) bool {
	return !equalMaps(old.Labels, cur.Labels) ||
		len(old.Status.Images) != len(cur.Status.Images) ||
		old.Status.NodeInfo.ContainerRuntimeVersion != cur.Status.NodeInfo.ContainerRuntimeVersion ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		isReady(old) != isReady(cur) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// nodeChanged reacts to a node joining, leaving or being relabelled at
// once, without waiting for a refresh.
func (c *Controller) nodeChanged(obj any) {
	key, ok := objectKey(obj)
	if !ok {
		return
	}
	c.nodeQueue.Add(key)
	c.queueAllCaches()
}

// podOf is the pod an informer event carries, also when it is a
// deletion's last known state.
func podOf(obj any) (*corev1.Pod, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	return pod, ok
}

func (c *Controller) podChanged(obj any) {
	pod, ok := podOf(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	delete(c.created, pod.Namespace+"/"+pod.Name)
	c.mu.Unlock()
	if key := pod.Annotations[cacheAnno]; key != "" {
		c.cacheQueue.AddAfter(key, batchDelay)
	}
}

// podGone reacts to a pod's deletion: it is no longer one to delete, and
// results held for it are written now (results.go).
func (c *Controller) podGone(obj any) {
	pod, ok := podOf(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	delete(c.deleted, pod.UID)
	c.mu.Unlock()
	c.releaseHeld(pod.Spec.NodeName, pod.Namespace+"/"+pod.Name)
	c.podChanged(pod)
}

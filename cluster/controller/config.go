package controller

import (
	"fmt"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// DefaultKubeFledgedServiceAccounts are the service accounts kube-fledged's
// controller runs under when installed as documented: its manifests
// (kubefledged-controller), its published Helm chart as `helm install
// kube-fledged kubefledged-charts/kube-fledged` (kube-fledged-controller),
// and the chart in its repository (chart "kubefledged") under the same
// release name (kube-fledged-kubefledged-controller). A Helm install names
// it <release fullname>-controller: give another name with
// --kube-fledged-service-account.
var DefaultKubeFledgedServiceAccounts = []string{"kubefledged-controller", "kube-fledged-controller", "kube-fledged-kubefledged-controller"}

// Config is what a Controller needs. Kube, Dynamic and NoopImage are
// required; zero values of the rest take the documented defaults.
type Config struct {
	// Kube is for Nodes, pods, Events and Leases: give it a protobuf
	// content type (see Protobuf), as the kubelet and the controller
	// manager do; JSON costs the API server much more per pod.
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface

	// NoopImage is this project's image; its static /pullrecords-noop
	// program is what pre-pull pods run, so cached images need no shell.
	NoopImage string
	// PriorityClassName is given to pre-pull pods when set.
	PriorityClassName string

	// PullDeadline bounds each pull of a pre-pull pod: the images still
	// waiting when the pod made no progress (no container started or
	// finished) for this long fail with what each last reported. Default 5m
	// (kube-fledged's --image-pull-deadline-duration, here per pull instead
	// of per batch).
	PullDeadline time.Duration
	// RefreshInterval re-checks every cache this long after its last
	// action completed; kube-fledged's --image-cache-refresh-frequency.
	// Default 15m; negative disables periodic refresh.
	RefreshInterval time.Duration
	// MaxInFlightPerNode and MaxInFlight bound the pre-pull pods that
	// exist at once on one node and in the whole cluster. Defaults 2, 200.
	MaxInFlightPerNode int
	MaxInFlight        int
	// MaxImagesPerPod bounds the images one pre-pull pod pulls (one
	// container each): a node's images that need a pull go, in spec order,
	// into pods of at most this many, and MaxInFlightPerNode counts pods.
	// Default 32; 1..64 (deploy/cluster/admission.yaml admits at most 64
	// containers).
	MaxImagesPerPod int
	// AgentTimeout is how old an agent's heartbeat may be before the
	// controller stops trusting its presence report and falls back to the
	// node status. Default 3m.
	AgentTimeout time.Duration
	// MaxImageFsUsedPercent skips pulls on a node whose agent reports its
	// image filesystem fuller than this. Default 85 (the kubelet's image GC
	// high threshold); 100 disables the check.
	MaxImageFsUsedPercent int
	// FailuresPerImage caps the failures an ImageCache status lists per
	// image; the rest are counted. Default 10.
	FailuresPerImage int
	// CacheWorkers and NodeWorkers are the goroutines syncing caches and
	// nodes. Defaults 2 and 8.
	CacheWorkers int
	NodeWorkers  int

	// KubeFledgedNamespace and KubeFledgedServiceAccounts name
	// kube-fledged's own controller: Run refuses to start only while a pod
	// with kube-fledged's controller labels (its manifests' or its Helm
	// chart's) runs in that namespace under one of those service accounts,
	// and removes kube-fledged's leftover Jobs only there. Pods elsewhere (a
	// tenant's look-alike) change nothing. Defaults "kube-fledged" and
	// DefaultKubeFledgedServiceAccounts.
	KubeFledgedNamespace       string
	KubeFledgedServiceAccounts []string

	// Metrics, if set, counts the controller's work (NewMetrics; register
	// it with a registry of your own). Nil counts nothing.
	Metrics *Metrics

	// Placement is where pre-pull pods may go (see Placement): by
	// default not on control-plane, cordoned or not-Ready nodes, nor on
	// nodes with a NoSchedule or NoExecute taint, and the pods carry no
	// toleration. Widening it grants every tenant's caches those nodes.
	Placement Placement

	// Clock is for tests; default the real clock.
	Clock clock.WithTicker

	// MaxImagesPerCache bounds the distinct images one ImageCache lists
	// (all its cacheSpec entries): a cache with more is refused at once,
	// status Failed with reason CacheTooLarge, and nothing of it is written
	// to any node. Default DefaultMaxImagesPerCache (1000).
	MaxImagesPerCache int
	// MaxCacheImagesPerNode bounds the (cache, image) entries one node's
	// NodeImages holds, so that the object stays under 1 MiB: an entry is
	// one pair at standard name lengths (image name up to 64 bytes, cache
	// namespace/name up to 48), longer pairs count as more. When the caches
	// wanting images on a node want more, they are admitted by fair shares
	// across namespaces (see admit); a cache cut on a node gets failed
	// results there with reason NodeImageLimit, in its own status only.
	// Default DefaultMaxCacheImagesPerNode (360).
	MaxCacheImagesPerNode int
}

func (c *Config) setDefaults() error {
	if c.Kube == nil || c.Dynamic == nil {
		return fmt.Errorf("%w: Kube and Dynamic clients are required", ErrInvalidConfig)
	}
	if c.NoopImage == "" {
		return fmt.Errorf("%w: NoopImage is required (the image holding /pullrecords-noop)", ErrInvalidConfig)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n == 0 {
			*n = v
		}
	}
	def(&c.PullDeadline, 5*time.Minute)
	def(&c.RefreshInterval, 15*time.Minute)
	def(&c.AgentTimeout, 3*time.Minute)
	defInt(&c.MaxInFlightPerNode, 2)
	defInt(&c.MaxInFlight, 200)
	defInt(&c.MaxImagesPerPod, defaultMaxImagesPerPod)
	defInt(&c.MaxImageFsUsedPercent, 85)
	defInt(&c.FailuresPerImage, 10)
	defInt(&c.CacheWorkers, 2)
	defInt(&c.NodeWorkers, 8)
	defInt(&c.MaxImagesPerCache, DefaultMaxImagesPerCache)
	defInt(&c.MaxCacheImagesPerNode, DefaultMaxCacheImagesPerNode)
	if c.MaxImagesPerCache < 0 || c.MaxCacheImagesPerNode < 0 {
		return fmt.Errorf("%w: MaxImagesPerCache and MaxCacheImagesPerNode must be positive", ErrInvalidConfig)
	}
	switch {
	case c.PullDeadline < 0 || c.AgentTimeout < 0:
		return fmt.Errorf("%w: PullDeadline and AgentTimeout must be positive", ErrInvalidConfig)
	case c.MaxInFlightPerNode < 0 || c.MaxInFlight < 0 || c.FailuresPerImage < 0 || c.CacheWorkers < 0 || c.NodeWorkers < 0:
		return fmt.Errorf("%w: limits and worker counts must be positive", ErrInvalidConfig)
	case c.MaxImagesPerPod < 1 || c.MaxImagesPerPod > maxImagesPerPodLimit:
		return fmt.Errorf("%w: MaxImagesPerPod %d is not in 1..%d", ErrInvalidConfig, c.MaxImagesPerPod, maxImagesPerPodLimit)
	case c.MaxImageFsUsedPercent < 0 || c.MaxImageFsUsedPercent > 100:
		return fmt.Errorf("%w: MaxImageFsUsedPercent %d is not in 1..100", ErrInvalidConfig, c.MaxImageFsUsedPercent)
	}
	if err := c.Placement.validate(); err != nil {
		return err
	}
	if c.KubeFledgedNamespace == "" {
		c.KubeFledgedNamespace = "kube-fledged"
	}
	if len(c.KubeFledgedServiceAccounts) == 0 {
		c.KubeFledgedServiceAccounts = DefaultKubeFledgedServiceAccounts
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return nil
}

// Protobuf returns a copy of cfg that talks protobuf to the API server, for
// Config.Kube. (Custom resources only speak JSON: keep cfg for Dynamic.)
func Protobuf(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return c
}

package kubeletadapter

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	upstream "k8s.io/kubernetes/pkg/kubelet/images/pullmanager"
	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/pullmanager"
	"github.com/pullrecords/pullrecords/recordsdir"
)

// ImagePullManager is the kubelet's pullmanager.ImagePullManager backed by
// this library's pullmanager.PullManager. It converts the kubelet's internal
// credential types to the library's and back; it adds no behaviour of its
// own.
type ImagePullManager struct {
	manager *pullmanager.PullManager
	metrics *pullmanager.Metrics
	records *recordsdir.Records
	// cache is the in-process image cache, nil unless the node
	// configuration declares imageCacheFile.
	cache *imageCacheRunner
}

var _ upstream.ImagePullManager = (*ImagePullManager)(nil)

// Metrics returns the manager's metrics, or nil when it keeps none.
func (a *ImagePullManager) Metrics() *pullmanager.Metrics { return a.metrics }

// Records returns the accessor the manager keeps its records in: the cache
// over the directory store.
func (a *ImagePullManager) Records() accessor.PullRecordsAccessor { return a.records.Accessor() }

// Close stops the in-process image cache, if one runs, and waits for it
// (work cut off is recorded as failed, so no intent is left behind), then
// releases the directory store opened by NewForKubelet. The manager must
// not be used afterwards.
func (a *ImagePullManager) Close() error {
	if a.cache != nil {
		a.cache.Stop()
	}
	return a.records.Close()
}

func (a *ImagePullManager) RecordPullIntent(logger klog.Logger, image string) error {
	return a.manager.RecordPullIntent(logger, image)
}

func (a *ImagePullManager) RecordImagePulled(ctx context.Context, image, imageRef string, credentials *kubeletconfig.ImagePullCredentials) {
	a.manager.RecordImagePulled(ctx, image, imageRef, CredentialsFromKubelet(credentials))
}

func (a *ImagePullManager) RecordImagePullFailed(ctx context.Context, image string) {
	a.manager.RecordImagePullFailed(ctx, image)
}

// MustAttemptImagePull asks the library's manager. getPodCredentials is
// called (at most once, through the manager) only when the decision needs
// the pod's credentials, as in the kubelet.
func (a *ImagePullManager) MustAttemptImagePull(ctx context.Context, image, imageRef string, getPodCredentials upstream.GetPodCredentials) (bool, error) {
	var get pullmanager.GetPodCredentials
	if getPodCredentials != nil {
		get = func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
			secrets, sa, err := getPodCredentials()
			return SecretsFromKubelet(secrets), ServiceAccountFromKubelet(sa), err
		}
	}
	return a.manager.MustAttemptImagePull(ctx, image, imageRef, get)
}

func (a *ImagePullManager) PruneUnknownRecords(ctx context.Context, imageList []string, until time.Time) {
	a.manager.PruneUnknownRecords(ctx, imageList, until)
}

// newImageLister presents the kubelet's image service (the runtime manager)
// as the library's imageruntime.ImageLister.
func newImageLister(images kubecontainer.ImageService) imageruntime.ImageLister {
	if images == nil {
		return nil
	}
	return imageLister{images: images}
}

type imageLister struct {
	images kubecontainer.ImageService
}

func (l imageLister) ListImages(ctx context.Context) ([]imageruntime.Image, error) {
	in, err := l.images.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]imageruntime.Image, len(in))
	for i, img := range in {
		out[i] = imageruntime.Image{ID: img.ID, RepoTags: img.RepoTags, RepoDigests: img.RepoDigests}
	}
	return out, nil
}

// Option configures NewForKubelet.
type Option func(*options)

type options struct {
	registerer   prometheus.Registerer
	storeOptions []fsstore.Option
	// nodeConfigPath is the node configuration file; nil means the default,
	// NodeConfigPath(rootDirectory), and "" means none.
	nodeConfigPath *string
	// clock is the manager's and the credential proofs' clock; nil means
	// the real one.
	clock clock.PassiveClock
	// imageCache holds the in-process image cache's test hooks.
	imageCache imageCacheHooks
}

// WithClock sets the clock the manager and the credential proofs read
// (default the real clock), for tests.
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) { o.clock = c }
}

// WithRegisterer sets the registry the manager's kubelet-named metrics are
// swapped into (see SwapKubeletMetrics). The default is the kubelet's
// global registry, legacyregistry.Registerer(). nil turns metrics off: the
// kubelet's own (idle) collectors stay registered.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.registerer = reg }
}

// WithStoreOptions passes options to fsstore.New.
func WithStoreOptions(opts ...fsstore.Option) Option {
	return func(o *options) { o.storeOptions = append(o.storeOptions, opts...) }
}

// WithNodeConfigPath makes NewForKubelet read the node configuration (see
// ReadNodeConfig) from path instead of NodeConfigPath(rootDirectory), for
// tests and for distributions that keep it elsewhere. "" reads no file:
// every switch stays off whatever is on disk.
func WithNodeConfigPath(path string) Option {
	return func(o *options) { o.nodeConfigPath = &path }
}

// NewForKubelet builds the manager the way the kubelet builds its own, from
// the values kuberuntime_manager.go has at hand: the kubelet root
// directory, the kubelet's policy enforcer (built by
// pullmanager.NewImagePullCredentialVerificationPolicy from the config), the
// runtime manager as image service, and the three sizes the kubelet
// computes (maxParallelPulls = *maxParallelImagePulls or 0, intent cache
// max(2*maxPods, 2*maxParallelPulls), record cache 5*maxPods).
//
// It opens the records with recordsdir.Open: fsstore in
// <rootDirectory>/image_manager (the kubelet's files, read and written in
// the kubelet's format), a memstore.NewCache in front of it (unbounded: the
// two cache sizes only scale the in-memory usage gauges, see
// pullmanager.Metrics.SetNominalCacheSizes), and
// pullmanager.NewImagePullManager, whose start-up recovery lists the
// runtime's images once if intents were left over. maxParallelPulls raises
// the lock stripe count above the library default when larger. Errors from
// opening the store (for example another writer holding the directory) are
// returned wrapped, never swallowed.
//
// Before opening anything it reads the node configuration (ReadNodeConfig)
// from NodeConfigPath(rootDirectory), or the path WithNodeConfigPath gives,
// and passes its switches to the manager. No file means every switch off,
// the kubelet's behaviour; a file it cannot use is returned as an error
// ("pullrecords node configuration <path>: ...", matching
// ErrInvalidNodeConfig), so the kubelet does not start on a default the
// node's owner did not ask for.
//
// With credentialExpiry in the node configuration, the proofs of pull
// credentials are kept in CredentialProofsDir(rootDirectory), outside
// image_manager (recordsdir.WithCredentialExpiry): a stock kubelet on the
// same root directory never reads them, and one that ran meanwhile leaves
// every credential it recorded unproven, so those pods pull once more.
//
// Unless WithRegisterer(nil), the kubelet-named metrics replace the
// kubelet's own in the kubelet's global registry (SwapKubeletMetrics); a
// failed swap is logged and leaves the kubelet's idle collectors in place.
func NewForKubelet(ctx context.Context, rootDirectory string, policy upstream.ImagePullPolicyEnforcer, images kubecontainer.ImageService, maxParallelPulls, intentCacheSize, pulledRecordsCacheSize int32, opts ...Option) (*ImagePullManager, error) {
	logger := klog.FromContext(ctx)
	if policy == nil {
		return nil, errors.New("kubeletadapter: the credential verification policy is nil")
	}
	o := options{registerer: legacyregistry.Registerer()}
	for _, opt := range opts {
		opt(&o)
	}
	var configPath string
	switch {
	case o.nodeConfigPath != nil:
		configPath = *o.nodeConfigPath
	case rootDirectory != "":
		// An empty root directory is refused by recordsdir.Open below;
		// never read a configuration relative to the working directory.
		configPath = NodeConfigPath(rootDirectory)
	}
	config, err := ReadNodeConfig(configPath)
	if err != nil {
		return nil, err
	}
	// The declared cache file is read before anything is opened, as the
	// node configuration is: a bad one keeps the kubelet from starting.
	var caches []imagecache.ImageCache
	if config.ImageCacheFile != "" {
		if caches, err = readImageCacheFile(config.ImageCacheFile); err != nil {
			return nil, err
		}
	}
	var metrics *pullmanager.Metrics
	if o.registerer != nil {
		metrics = pullmanager.NewMetrics()
		metrics.SetNominalCacheSizes(int(intentCacheSize), int(pulledRecordsCacheSize))
	}
	mopts := []pullmanager.Option{pullmanager.WithMetrics(metrics)}
	var stampOptions []credstamp.Option
	if o.clock != nil {
		mopts = append(mopts, pullmanager.WithClock(o.clock))
		stampOptions = append(stampOptions, credstamp.WithClock(o.clock))
	}
	if maxParallelPulls > defaultLockStripes {
		mopts = append(mopts, pullmanager.WithLockStripes(int(maxParallelPulls)))
	}
	mopts = append(mopts, config.ManagerOptions()...)
	ropts := []recordsdir.Option{recordsdir.WithStoreOptions(o.storeOptions...), recordsdir.WithManagerOptions(mopts...)}
	if config.CredentialExpiry > 0 {
		ropts = append(ropts, recordsdir.WithCredentialExpiry(CredentialProofsDir(rootDirectory), config.CredentialExpiry, stampOptions...))
	}
	records, err := recordsdir.Open(ctx, rootDirectory, policy, newImageLister(images), ropts...)
	if err != nil {
		return nil, err
	}
	var cache *imageCacheRunner
	if config.ImageCacheFile != "" {
		cache, err = startImageCache(ctx, rootDirectory, config.ImageCacheFile, caches, images, records.Manager(), o.imageCache)
		if err != nil {
			return nil, errors.Join(err, records.Close())
		}
	}
	if metrics != nil {
		if err := SwapKubeletMetrics(o.registerer, metrics, false); err != nil {
			logger.Error(err, "Could not replace the kubelet's image pull manager metrics; they stay idle")
		}
	}
	// One line that says, in the kubelet's log, which pull manager runs: a
	// stock kubelet's and a fork's logs otherwise look alike.
	logger.Info("Image pull manager: pullrecords library", "module", libraryModule, "version", libraryVersion(),
		"records", filepath.Join(rootDirectory, fsstore.DirName),
		"deliberateDifferences", describeSwitches(config), "nodeConfig", describeConfigSource(config, configPath))
	return &ImagePullManager{manager: records.Manager(), metrics: metrics, records: records, cache: cache}, nil
}

// describeSwitches names the switches in force for the start-up line.
func describeSwitches(c NodeConfig) string {
	on := c.Switches()
	if len(on) == 0 {
		return "none turned on"
	}
	return strings.Join(on, ", ")
}

// describeConfigSource says for the start-up line where the switches came
// from.
func describeConfigSource(c NodeConfig, path string) string {
	switch {
	case c.Path != "":
		return c.Path
	case path == "":
		return "not read (WithNodeConfigPath(\"\"))"
	default:
		return "no file at " + path
	}
}

// defaultLockStripes is the library manager's default stripe count
// (pullmanager.WithLockStripes); below it maxParallelPulls changes nothing.
const defaultLockStripes = 64

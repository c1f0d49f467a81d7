package recordsdir

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// Records is an open records directory: the directory store holding its
// writer lock, the cache in front of it and the pull manager over the cache.
type Records struct {
	store   *fsstore.Store
	cache   *memstore.Cache
	manager *pullmanager.PullManager
}

// Open opens the records in <rootDir>/image_manager (fsstore.New, which
// takes the directory's writer lock), puts a memstore.NewCache in front of
// the store and builds pullmanager.NewImagePullManager over the cache with
// policy and images (images may be nil: leftover intents then stay). The
// logger is klog.FromContext(ctx). On error nothing stays open; see the
// package documentation for the errors.
func Open(ctx context.Context, rootDir string, policy pullmanager.ImagePullPolicyEnforcer, images imageruntime.ImageLister, opts ...Option) (*Records, error) {
	if policy == nil {
		return nil, fmt.Errorf("failed to create image pull manager: %w: the credential verification policy is nil", pullmanager.ErrMissingDependency)
	}
	if rootDir == "" {
		return nil, fmt.Errorf("failed to open the image pull records: %w", ErrNoRootDir)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	logger := klog.FromContext(ctx)
	store, err := fsstore.New(logger, rootDir, o.store...)
	if err != nil {
		return nil, fmt.Errorf("failed to open the image pull records: %w", err)
	}
	cache, err := memstore.NewCache(logger, store)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("failed to set up the image pull records cache: %w", err)
	}
	manager, err := pullmanager.NewImagePullManager(ctx, cache, policy, images, o.manager...)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("failed to create image pull manager: %w", err)
	}
	logger.V(2).Info("Opened the image pull records", "path", filepath.Join(rootDir, fsstore.DirName))
	return &Records{store: store, cache: cache, manager: manager}, nil
}

// Manager returns the pull manager over the records.
func (r *Records) Manager() *pullmanager.PullManager { return r.manager }

// Accessor returns the cache in front of the directory store: the accessor
// the manager keeps its records in.
func (r *Records) Accessor() accessor.PullRecordsAccessor { return r.cache }

// Close closes the directory store and releases its writer lock. Calls
// after the first do nothing and return nil. The manager and the accessor
// must not be used afterwards.
func (r *Records) Close() error { return r.store.Close() }

package recordsdir

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
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
	stamps  *credstamp.Store // nil without WithCredentialExpiry
	closed  sync.Once
	err     error // of the first Close
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
	mopts := o.manager
	var stamps *credstamp.Store
	if o.expiry != nil {
		if stamps, err = openProofs(logger, rootDir, o.expiry); err != nil {
			_ = store.Close()
			return nil, err
		}
		mopts = append(mopts[:len(mopts):len(mopts)], pullmanager.WithCredentialExpiry(o.expiry.ttl, stamps))
	}
	manager, err := pullmanager.NewImagePullManager(ctx, cache, policy, images, mopts...)
	if err != nil {
		_ = store.Close()
		if stamps != nil {
			_ = stamps.Close()
		}
		return nil, fmt.Errorf("failed to create image pull manager: %w", err)
	}
	logger.V(2).Info("Opened the image pull records", "path", filepath.Join(rootDir, fsstore.DirName))
	return &Records{store: store, cache: cache, manager: manager, stamps: stamps}, nil
}

// openProofs opens the credential proofs of WithCredentialExpiry and drops
// the expired ones.
func openProofs(logger klog.Logger, rootDir string, e *expiryOptions) (*credstamp.Store, error) {
	if e.ttl <= 0 {
		return nil, fmt.Errorf("failed to open the credential proofs: %w: WithCredentialExpiry(%q, %v): want a TTL above zero",
			pullmanager.ErrInvalidOption, e.dir, e.ttl)
	}
	if !filepath.IsAbs(e.dir) {
		return nil, fmt.Errorf("failed to open the credential proofs: %w: WithCredentialExpiry(%q, %v): want an absolute directory",
			pullmanager.ErrInvalidOption, e.dir, e.ttl)
	}
	records, err := filepath.Abs(filepath.Join(rootDir, fsstore.DirName))
	if err != nil {
		return nil, fmt.Errorf("failed to open the credential proofs: %w", err)
	}
	if rel, err := filepath.Rel(records, filepath.Clean(e.dir)); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("failed to open the credential proofs: %w: WithCredentialExpiry(%q, %v): the directory is inside %s, whose files are the kubelet's",
			pullmanager.ErrInvalidOption, e.dir, e.ttl, records)
	}
	stamps, err := credstamp.Open(logger, e.dir, e.stampOptions...)
	if err != nil {
		return nil, fmt.Errorf("failed to open the credential proofs: %w", err)
	}
	if _, err := stamps.Prune(e.ttl); err != nil {
		// Expired proofs vouch for nothing whether or not they are removed.
		logger.Error(err, "Could not prune expired credential proofs", "dir", e.dir)
	}
	return stamps, nil
}

// Manager returns the pull manager over the records.
func (r *Records) Manager() *pullmanager.PullManager { return r.manager }

// Accessor returns the cache in front of the directory store: the accessor
// the manager keeps its records in.
func (r *Records) Accessor() accessor.PullRecordsAccessor { return r.cache }

// Close closes the directory store, releasing its writer lock, and the
// credential proofs, if any. Calls after the first do nothing and return
// the first call's error. The manager and the accessor must not be used
// afterwards.
func (r *Records) Close() error {
	r.closed.Do(func() {
		r.err = r.store.Close()
		if r.stamps != nil {
			r.err = errors.Join(r.err, r.stamps.Close())
		}
	})
	return r.err
}

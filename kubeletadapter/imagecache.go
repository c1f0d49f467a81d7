package kubeletadapter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// ImageCacheFilePollInterval is how often the running in-process image
// cache reads its cache file again to pick up a change.
//
// Polling rather than inotify: it takes no watch descriptor (inotify's
// per-user limit is shared with every other watcher on the node), and sees
// a file replaced by rename, edited in place, or changed through another
// mount alike. A poll is one lstat while the file is the one last read
// (same file, size and modification time); only a changed file is read and
// parsed again, and a read that finds the same caches changes nothing.
const ImageCacheFilePollInterval = time.Second

// ImageCacheStateDir is the in-process image cache's state directory under
// the kubelet's root directory: <rootDirectory>/pullrecords/imagecache,
// beside the node configuration. It holds the applied caches, their inline
// pull secrets included (mode 0600 in a 0700 directory), and their last
// statuses.
func ImageCacheStateDir(rootDirectory string) string {
	return filepath.Join(rootDirectory, "pullrecords", "imagecache")
}

// readImageCacheFile reads the declared cache file for start-up; every
// error names the file and matches ErrImageCache.
func readImageCacheFile(path string) ([]imagecache.ImageCache, error) {
	caches, err := imagecache.ReadCacheFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImageCache, err)
	}
	return caches, nil
}

// imageCacheRunner is the in-process image cache of one kubelet: an
// imagecache.Manager over the kubelet's image service and pull manager,
// and the loop that keeps it in step with the cache file.
type imageCacheRunner struct {
	logger  klog.Logger
	file    string
	manager *imagecache.Manager
	ticker  clock.Ticker
	cancel  context.CancelFunc
	done    chan struct{}
	stop    sync.Once
	hooks   imageCacheHooks

	// Touched by the watch loop only.
	applied []imagecache.ImageCache // the caches last synced from the file
	problem string                  // the file's problem last logged, "" when none
	// settled is the file as last read, when that read ended in a synced
	// state or in a problem already logged, and settledErr that read's
	// error: a check that finds the same file (os.SameFile, size and
	// modification time) answers as that read did without reading it.
	settled    fs.FileInfo
	settledErr error
}

// imageCacheHooks let tests drive the watch loop and see what it did.
type imageCacheHooks struct {
	clock    clock.WithTicker
	onStatus func(imagecache.CacheStatus)
	onCheck  func(imagecache.SyncResult, error)
}

// startImageCache starts the in-process image cache: it makes the manager
// (loading its state from ImageCacheStateDir(rootDirectory) and resuming
// what a previous kubelet left unfinished), syncs it with caches (read from
// file at start-up), and starts its work and the file's watch loop in the
// background. Every error matches ErrImageCache and names the file; on an
// error nothing keeps running.
func startImageCache(ctx context.Context, rootDirectory, file string, caches []imagecache.ImageCache,
	images kubecontainer.ImageService, pulls *pullmanager.PullManager, hooks imageCacheHooks) (*imageCacheRunner, error) {
	logger := klog.FromContext(ctx).WithName("imagecache")
	if images == nil {
		return nil, fmt.Errorf("%w %s: the kubelet passed no image service", ErrImageCache, file)
	}
	if hooks.clock == nil {
		hooks.clock = clock.RealClock{}
	}
	r := &imageCacheRunner{logger: logger, file: file, hooks: hooks, done: make(chan struct{})}
	stateDir := ImageCacheStateDir(rootDirectory)
	m, err := imagecache.New(logger, kubeletImageService{images: images}, pulls,
		imagecache.WithStateDir(stateDir),
		imagecache.WithResultHandler(r.logResult),
		imagecache.WithStatusHandler(r.logStatus),
	)
	if err != nil {
		return nil, fmt.Errorf("%w %s: state directory %s: %w", ErrImageCache, file, stateDir, err)
	}
	r.manager = m
	runCtx, cancel := context.WithCancel(klog.NewContext(ctx, logger))
	r.cancel = cancel
	res, err := m.Sync(runCtx, caches)
	if err != nil {
		// Run with a cancelled context releases the manager's queue at once.
		cancel()
		_ = m.Run(runCtx)
		return nil, fmt.Errorf("%w %s: applying its caches: %w", ErrImageCache, file, err)
	}
	r.applied = caches
	// The ticker exists before this returns: a test's fake clock steps it.
	r.ticker = hooks.clock.NewTicker(ImageCacheFilePollInterval)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.Run(runCtx); err != nil {
			logger.Error(err, "Image cache stopped")
		}
	})
	wg.Go(func() { r.watch(runCtx) })
	go func() {
		wg.Wait()
		close(r.done)
	}()
	logger.Info("Image cache: in process, over the kubelet's image service and pull manager",
		"file", file, "stateDir", stateDir, "caches", len(caches), "applied", res.Applied, "deleted", res.Deleted)
	return r, nil
}

// Stop stops the cache's work and the watch loop and waits for both: work
// cut off ends as imagecache's Run says (unknown/ShutDown results, intents
// cleared, caches left pending for the next start). It may be called more
// than once.
func (r *imageCacheRunner) Stop() {
	r.stop.Do(func() {
		r.cancel()
		<-r.done
	})
}

// watch checks the file at every tick until ctx ends.
func (r *imageCacheRunner) watch(ctx context.Context) {
	defer r.ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.ticker.C():
		}
		res, err := r.check(ctx)
		if errors.Is(err, imagecache.ErrShutDown) {
			return
		}
		if r.hooks.onCheck != nil {
			r.hooks.onCheck(res, err)
		}
	}
}

// check reads the file and, when its caches differ from those last synced,
// syncs the manager with them. A file that cannot be used (missing,
// unreadable, invalid) changes nothing: it is logged once per distinct
// problem, and the applied caches stay until a usable version comes.
func (r *imageCacheRunner) check(ctx context.Context) (imagecache.SyncResult, error) {
	fi, statErr := os.Lstat(r.file)
	if statErr == nil && r.settled != nil && os.SameFile(fi, r.settled) &&
		fi.Size() == r.settled.Size() && fi.ModTime().Equal(r.settled.ModTime()) {
		return imagecache.SyncResult{}, r.settledErr
	}
	r.settled = nil
	res, settled, err := r.read(ctx)
	if settled && statErr == nil {
		r.settled, r.settledErr = fi, err
	}
	return res, err
}

// read is check's reading and syncing of the file; settled says whether
// the outcome holds until the file changes (a failed Sync does not: the
// next tick tries again).
func (r *imageCacheRunner) read(ctx context.Context) (_ imagecache.SyncResult, settled bool, _ error) {
	caches, err := imagecache.ReadCacheFile(r.file)
	if err != nil {
		if msg := err.Error(); msg != r.problem {
			r.problem = msg
			var fe *imagecache.CacheFileError
			if errors.As(err, &fe) {
				r.logger.Error(err, "Ignoring the changed image cache file; the applied caches stay", "file", r.file, "problems", fe.Problems)
			} else {
				r.logger.Error(err, "Ignoring the image cache file; the applied caches stay", "file", r.file)
			}
		}
		return imagecache.SyncResult{}, true, err
	}
	if r.problem != "" {
		r.problem = ""
		r.logger.Info("Image cache file usable again", "file", r.file)
	}
	if reflect.DeepEqual(caches, r.applied) {
		return imagecache.SyncResult{}, true, nil
	}
	res, err := r.manager.Sync(ctx, caches)
	if err != nil {
		if !errors.Is(err, imagecache.ErrShutDown) {
			// Not recorded as applied: the next tick tries again.
			r.logger.Error(err, "Could not apply the changed image cache file", "file", r.file, "applied", res.Applied, "deleted", res.Deleted)
		}
		return res, false, err
	}
	r.applied = caches
	r.logger.Info("Image cache file changed", "file", r.file, "applied", res.Applied, "deleted", res.Deleted, "unchanged", res.Unchanged)
	return res, true, nil
}

// logStatus logs the status line of a batch when it completes: which cache,
// what work, and the count of each outcome. It holds no credential.
func (r *imageCacheRunner) logStatus(s imagecache.CacheStatus) {
	if s.Complete {
		r.logger.Info("Image cache status", "cache", s.ImageCache, "workType", s.WorkType, "batch", s.Batch,
			"requests", s.Requests, "succeeded", s.Counts[imagecache.StatusSucceeded],
			"alreadyPulled", s.Counts[imagecache.StatusAlreadyPulled], "failed", s.Counts[imagecache.StatusFailed],
			"unknown", s.Counts[imagecache.StatusUnknown], "duration", s.Duration)
	}
	if r.hooks.onStatus != nil {
		r.hooks.onStatus(s)
	}
}

// logResult logs a request that did not succeed, with its reason and
// message (imagecache puts no credential in either).
func (r *imageCacheRunner) logResult(res imagecache.ImageWorkResult) {
	if res.Status != imagecache.StatusFailed && res.Status != imagecache.StatusUnknown {
		return
	}
	r.logger.Info("Image cache request did not succeed", "cache", res.Request.ImageCache, "image", res.Request.Image,
		"workType", res.Request.WorkType, "status", res.Status, "reason", res.Reason, "message", res.Message, "attempts", res.Attempts)
}

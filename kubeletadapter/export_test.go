package kubeletadapter

import (
	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/imagecache"
)

// WithImageCacheTestHooks gives the in-process image cache a clock for its
// watch loop, and calls onStatus with every status of its manager and
// onCheck after every check of the cache file (nil hooks are skipped).
func WithImageCacheTestHooks(clk clock.WithTicker, onStatus func(imagecache.CacheStatus), onCheck func(imagecache.SyncResult, error)) Option {
	return func(o *options) {
		o.imageCache = imageCacheHooks{clock: clk, onStatus: onStatus, onCheck: onCheck}
	}
}

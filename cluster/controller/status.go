package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// statusInterval is how often an action's progress (counts) is written:
// each write is a request and an update event to every watcher of the
// caches, while a change of status or failures, and the action's end, are
// written at once whatever the interval.
const statusInterval = 5 * time.Second

// progressDue returns how long to wait before writing an in-progress
// status that only updates counts; zero means write now. A change of
// status, reason or failures is written at once.
func (c *Controller) progressDue(key string, ic *api.ImageCache, st api.ImageCacheStatus, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.statusWritten[key]
	if st.Status == ic.Status.Status && equality.Semantic.DeepEqual(st.Failures, ic.Status.Failures) && now.Sub(last) < statusInterval {
		return statusInterval - now.Sub(last)
	}
	c.statusWritten[key] = now
	return 0
}

// writeStatus writes an in-progress status when it changed.
func (c *Controller) writeStatus(ctx context.Context, ic *api.ImageCache, st api.ImageCacheStatus) error {
	if equality.Semantic.DeepEqual(st, ic.Status) {
		return nil
	}
	return c.putStatus(ctx, ic, st)
}

// putStatus replaces the status through the status subresource, guarded by
// the resource version the decision was made on.
func (c *Controller) putStatus(ctx context.Context, ic *api.ImageCache, st api.ImageCacheStatus) error {
	next := *ic
	next.Status = st
	u, err := api.ToUnstructured(&next)
	if err != nil {
		return err
	}
	u.SetAPIVersion(api.ImageCacheKind.GroupVersion().String())
	u.SetKind(api.ImageCacheKind.Kind)
	_, err = c.cfg.Dynamic.Resource(api.ImageCacheResource).Namespace(ic.Namespace).
		UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("writing status of %s/%s: %w", ic.Namespace, ic.Name, err)
	}
	return nil
}

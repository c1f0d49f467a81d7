package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// nextAction decides whether a new action starts: create for a cache never
// worked on, update when the spec changed, purge and refresh when their
// annotation asks, refresh when the period elapsed.
func (c *Controller) nextAction(ic *api.ImageCache, now time.Time) (string, bool) {
	st := ic.Status
	_, purgeAsked := ic.Annotations[api.PurgeAnnotation]
	_, refreshAsked := ic.Annotations[api.RefreshAnnotation]
	processing := st.Status == api.ActionStatusProcessing
	switch {
	case st.Batch == "" && st.Status == "":
		return api.ReasonImageCacheCreate, true
	case st.Batch == "":
		// Written by kube-fledged: adopt it with a fresh look at every node.
		return api.ReasonImageCacheRefresh, true
	case st.ObservedGeneration != ic.Generation:
		return api.ReasonImageCacheUpdate, true
	case purgeAsked && !(processing && st.Reason == api.ReasonImageCachePurge):
		return api.ReasonImageCachePurge, true
	case refreshAsked && !(processing && st.Reason == api.ReasonImageCacheRefresh):
		return api.ReasonImageCacheRefresh, true
	case !processing && c.refreshDue(ic, now) < 0:
		return api.ReasonImageCacheRefresh, true
	}
	return "", false
}

// refreshDue returns how long until the periodic refresh of a finished
// cache (negative: overdue; zero: never).
func (c *Controller) refreshDue(ic *api.ImageCache, now time.Time) time.Duration {
	st := ic.Status
	if c.cfg.RefreshInterval <= 0 || st.CompletionTime == nil || purged(ic) || st.Reason == api.ReasonCacheSpecValidationFailed || st.Reason == ReasonCacheTooLarge {
		return 0
	}
	d := st.CompletionTime.Add(c.cfg.RefreshInterval).Sub(now)
	if d == 0 {
		d = -1
	}
	return d
}

// startAction writes a new action into the status: Processing, a new batch
// name, the generation it works on. Results of earlier batches stop
// counting from here.
func (c *Controller) startAction(ctx context.Context, ic *api.ImageCache, reason string, now time.Time) error {
	st := api.ImageCacheStatus{
		Status:             api.ActionStatusProcessing,
		Reason:             reason,
		Message:            processingMessages[reason],
		StartTime:          &metav1.Time{Time: now},
		ObservedGeneration: ic.Generation,
		Batch:              strconv.FormatInt(ic.Generation, 10) + "-" + strconv.FormatInt(now.UnixNano(), 36),
	}
	klog.FromContext(ctx).Info("Starting action", "reason", reason, "batch", st.Batch)
	c.recorder.Eventf(eventRef(ic), corev1.EventTypeNormal, reason, "%s", st.Message)
	if err := c.putStatus(ctx, ic, st); err != nil {
		return err
	}
	// The start counts as a write: its first counts come statusInterval
	// later, not in a second write right after it.
	c.mu.Lock()
	c.statusWritten[cacheKey(ic)] = now
	c.mu.Unlock()
	return nil
}

// finishAction ends the current action: the annotation that asked for it
// goes first, then the final status (so a crash in between leaves an action
// that is finished again, not one that starts again), then an Event.
func (c *Controller) finishAction(ctx context.Context, ic *api.ImageCache, st api.ImageCacheStatus, now time.Time) error {
	var drop []string
	for _, a := range []string{api.RefreshAnnotation, api.PurgeAnnotation} {
		if _, ok := ic.Annotations[a]; ok {
			if a == api.PurgeAnnotation && ic.Status.Reason != api.ReasonImageCachePurge {
				continue // asked after this action started: it runs next
			}
			drop = append(drop, a)
		}
	}
	if len(drop) > 0 {
		patch, err := dropAnnotationsPatch(drop)
		if err != nil {
			return err
		}
		if _, err := c.cfg.Dynamic.Resource(api.ImageCacheResource).Namespace(ic.Namespace).
			Patch(ctx, ic.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("removing annotations %v: %w", drop, err)
		}
	}
	wasFinal := ic.Status.Status != api.ActionStatusProcessing && ic.Status.CompletionTime != nil
	if st.CompletionTime == nil || !wasFinal {
		st.CompletionTime = &metav1.Time{Time: now}
	}
	if equality.Semantic.DeepEqual(st, ic.Status) {
		return c.deleteActionPods(ctx, ic)
	}
	if err := c.putStatus(ctx, ic, st); err != nil {
		return err
	}
	if err := c.deleteActionPods(ctx, ic); err != nil {
		return err
	}
	if !wasFinal || ic.Status.Status != st.Status {
		kind := corev1.EventTypeNormal
		if st.Status == api.ActionStatusFailed {
			kind = corev1.EventTypeWarning
		}
		c.recorder.Eventf(eventRef(ic), kind, string(st.Status), "%s (%s)", st.Message, countsText(st.Counts))
		klog.FromContext(ctx).Info("Action finished", "status", st.Status, "reason", st.Reason, "counts", countsText(st.Counts))
	}
	return nil
}

// dropAnnotationsPatch is the JSON merge patch that removes the
// annotations names (a null value deletes a key).
func dropAnnotationsPatch(names []string) ([]byte, error) {
	null := make(map[string]any, len(names))
	for _, n := range names {
		null[n] = nil
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": null}})
}

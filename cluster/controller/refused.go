package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// Pre-pull pods the API server refuses to create. A namespace's Pod
// Security level, a ResourceQuota, a ValidatingAdmissionPolicy or a
// webhook can refuse a pod for as long as the namespace stays as it is:
// retrying would fail the same way, forever, with the cache Processing.
// Such a refusal ends the request instead, as a failed result whose reason
// names the rule and whose message is the API server's, and the cache gets
// one Warning event per action and reason. Everything else (conflicts,
// throttling, timeouts, server errors, a quota whose usage is not yet
// known, a namespace being deleted, and a quota exceeded while the
// controller's own pods there still run) is transient and retried as
// before.

// Reasons of a refused pre-pull pod's result and of its Warning event.
const (
	// ReasonPodSecurityRefused: the namespace's Pod Security level refused
	// the pod.
	ReasonPodSecurityRefused = "PodSecurityRefused"
	// ReasonQuotaRefused: a ResourceQuota of the namespace refused it
	// (exceeded, or a resource the quota requires is not set).
	ReasonQuotaRefused = "QuotaRefused"
	// ReasonAdmissionPolicyDenied: a ValidatingAdmissionPolicy denied it.
	ReasonAdmissionPolicyDenied = "AdmissionPolicyDenied"
	// ReasonAdmissionWebhookDenied: an admission webhook denied it.
	ReasonAdmissionWebhookDenied = "AdmissionWebhookDenied"
	// ReasonPodRefused: any other final refusal (authorization, a
	// LimitRange, validation).
	ReasonPodRefused = "PodRefused"
)

// refusal is the API server's final answer to a pod creation.
type refusal struct {
	reason  string
	message string // the API server's own message
	// exceeded: a quota's usage is at its limit (not a resource the quota
	// requires and the pod lacks), which pods finishing may free.
	exceeded bool
}

// podRefusal classifies a pod creation's error: ok is true when the API
// server refused the pod for good (403 Forbidden, 400 Bad Request, 422
// Invalid), with the reason naming the rule. It is false for every other
// error, which the caller retries.
func podRefusal(err error) (r refusal, ok bool) {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return refusal{}, false
	}
	st := status.Status()
	switch st.Code {
	case http.StatusForbidden, http.StatusBadRequest, http.StatusUnprocessableEntity:
	default:
		return refusal{}, false
	}
	msg := st.Message
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) ||
		strings.Contains(msg, "status unknown for quota") {
		// The namespace goes away, or the quota's usage is not yet
		// computed: neither is the namespace's standing answer.
		return refusal{}, false
	}
	// Policies and webhooks first: their messages are free text that may
	// mention anything.
	switch {
	case strings.Contains(msg, "ValidatingAdmissionPolicy '"):
		r.reason = ReasonAdmissionPolicyDenied
	case strings.Contains(msg, "admission webhook \""):
		r.reason = ReasonAdmissionWebhookDenied
	case strings.Contains(msg, "violates PodSecurity"):
		r.reason = ReasonPodSecurityRefused
	case strings.Contains(msg, "exceeded quota"):
		r.reason, r.exceeded = ReasonQuotaRefused, true
	case strings.Contains(msg, "failed quota") ||
		strings.Contains(msg, "insufficient quota"):
		r.reason = ReasonQuotaRefused
	default:
		r.reason = ReasonPodRefused
	}
	r.message = msg
	return r, true
}

// refusedEvents remembers, per cache, the action (batch) and reasons it
// already sent a Warning event for, so that a round refusing many pods,
// and the rounds after it, add no more. The zero value is ready.
type refusedEvents struct {
	mu   sync.Mutex
	sent map[string]refusedBatch // cache key -> the current action's reasons
}

type refusedBatch struct {
	uid, batch string
	reasons    map[string]bool
}

// first reports whether reason is new for the cache's current action, and
// remembers it.
func (e *refusedEvents) first(ic *api.ImageCache, reason string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := cacheKey(ic)
	b := e.sent[key]
	if b.uid != string(ic.UID) || b.batch != ic.Status.Batch {
		b = refusedBatch{uid: string(ic.UID), batch: ic.Status.Batch, reasons: map[string]bool{}}
	}
	if b.reasons[reason] {
		return false
	}
	b.reasons[reason] = true
	if e.sent == nil {
		e.sent = map[string]refusedBatch{}
	}
	e.sent[key] = b
	return true
}

// forget drops a deleted cache's memory.
func (e *refusedEvents) forget(key string) {
	e.mu.Lock()
	delete(e.sent, key)
	e.mu.Unlock()
}

// refusedPod is a planned pod the API server refused.
type refusedPod struct {
	planned plannedPod
	refusal refusal
	err     error
}

// settleRefused ends the requests of a round's refused pods, once every
// pod of the round was attempted. A quota exceeded while the controller's
// own pre-pull pods still run in the namespace is not the namespace's
// final answer: those pods, finishing, free it (the controller's own
// limits, not the quota, should bound them). Those requests are retried:
// the first such error is returned, the others wait with it.
func (c *Controller) settleRefused(ctx context.Context, ic *api.ImageCache, refused []refusedPod) error {
	var retry error
	for _, r := range refused {
		if r.refusal.exceeded && c.ownPodsPulling(ic.Namespace) {
			if retry == nil {
				retry = r.err
			}
			continue
		}
		for _, img := range r.planned.images {
			c.podRefused(ctx, ic, r.planned.node, img, r.refusal)
		}
	}
	return retry
}

// ownPodsPulling reports whether any of the controller's pre-pull pods in
// namespace ns still counts against its quota: one the informer shows
// pulling, or one just created that it does not show yet.
func (c *Controller) ownPodsPulling(ns string) bool {
	pods, _ := c.pods.Pods(ns).List(labels.SelectorFromSet(labels.Set{managedByLabel: managedByValue}))
	for _, p := range pods {
		if pulling(p) && c.owns(p) {
			return true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.created {
		if strings.HasPrefix(name, ns+"/") {
			return true
		}
	}
	return false
}

// podRefused ends image on node as failed with the refusal, and sends the
// cache's Warning event when the reason is new for its action.
func (c *Controller) podRefused(ctx context.Context, ic *api.ImageCache, node, image string, r refusal) {
	c.settle(ic, node, image, api.Outcome{Status: api.WorkFailed, Reason: r.reason,
		Message: "the API server refused the pre-pull pod: " + r.message}, fromPod{})
	c.cacheQueue.AddAfter(cacheKey(ic), batchDelay)
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Pre-pull pod refused", "node", node, "image", image, "reason", r.reason, "message", r.message)
	if c.refused.first(ic, r.reason) {
		logger.Info("The API server refuses this cache's pre-pull pods", "reason", r.reason, "message", r.message)
		c.recorder.Eventf(eventRef(ic), corev1.EventTypeWarning, r.reason,
			"%s", truncateMessage(fmt.Sprintf("The API server refuses this cache's pre-pull pods (first: %s on node %s), so they fail for this action: %s",
				image, node, r.message), 1024))
	}
}

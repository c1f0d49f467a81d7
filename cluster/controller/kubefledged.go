package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// kube-fledged's labels on the Jobs its image manager creates (set by its
// code, whatever installed it).
const kubeFledgedJobSelector = "app=kubefledged,kubefledged=kubefledged-image-manager"

// kubeFledgedControllerLabels reports whether a pod carries the labels of
// kube-fledged's controller: its manifests' (app=kubefledged,
// kubefledged=kubefledged-controller) or its Helm chart's
// (app.kubernetes.io/name kubefledged or kube-fledged, the chart's name,
// and an instance label ending in -controller).
func kubeFledgedControllerLabels(l map[string]string) bool {
	if l["app"] == "kubefledged" && l["kubefledged"] == "kubefledged-controller" {
		return true
	}
	name := l["app.kubernetes.io/name"]
	return (name == "kubefledged" || name == "kube-fledged") && strings.HasSuffix(l["app.kubernetes.io/instance"], "-controller")
}

// takeOverFromKubeFledged refuses to run beside a running kube-fledged
// controller (both would act on every ImageCache) and removes the Jobs a
// stopped one left behind, with their pods. Only kube-fledged's own
// controller counts: a pod with its labels in Config.KubeFledgedNamespace
// running under one of Config.KubeFledgedServiceAccounts; look-alikes
// anyone may create elsewhere change nothing, and Jobs are removed only
// there. ImageCaches need no migration:
// the CRD is the same and an ImageCache kube-fledged wrote is adopted with
// a refresh (see nextAction).
func (c *Controller) takeOverFromKubeFledged(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	kfNS := c.cfg.KubeFledgedNamespace
	pods, err := c.cfg.Kube.CoreV1().Pods(kfNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("looking for a kube-fledged controller: %w", err)
	}
	for _, p := range pods.Items {
		if !kubeFledgedControllerLabels(p.Labels) || !slices.Contains(c.cfg.KubeFledgedServiceAccounts, p.Spec.ServiceAccountName) {
			continue
		}
		if p.DeletionTimestamp == nil && (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending) {
			return fmt.Errorf("%w: pod %s/%s (%s); scale its Deployment to 0 first, the ImageCaches are adopted as they are",
				ErrKubeFledgedRunning, p.Namespace, p.Name, p.Status.Phase)
		}
	}
	jobs, err := c.cfg.Kube.BatchV1().Jobs(kfNS).List(ctx, metav1.ListOptions{LabelSelector: kubeFledgedJobSelector})
	if err != nil {
		return fmt.Errorf("listing kube-fledged's Jobs: %w", err)
	}
	for _, j := range jobs.Items {
		err := c.cfg.Kube.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting kube-fledged's leftover Job %s/%s: %w", j.Namespace, j.Name, err)
		}
		logger.Info("Deleted kube-fledged's leftover Job", "job", klog.KObj(&j))
	}
	return nil
}

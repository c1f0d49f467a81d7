package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/imagecache"
)

// Labels and annotations of pre-pull pods.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "pullrecords-controller"
	cacheUIDLabel  = "pullrecords.io/cache-uid"
	batchLabel     = "pullrecords.io/batch"
	imageAnno      = "pullrecords.io/image"
	cacheAnno      = "pullrecords.io/cache"

	prepullContainer = "prepull"
	installContainer = "install-noop"
	noopDir          = "/pullrecords"
	noopPath         = noopDir + "/noop"
)

// Resources of each container of a pre-pull pod. Both requests and limits
// are set so that a namespace whose ResourceQuota covers requests.* or
// limits.* admits the pod; admission.yaml refuses a pre-pull pod whose
// limits exceed 100m CPU or 64Mi memory, so keep these below that.
const (
	prepullCPURequest    = "1m"
	prepullCPULimit      = "50m"
	prepullMemoryRequest = "4Mi"
	prepullMemoryLimit   = "32Mi"
)

// podName is the pre-pull pod's name for one (cache, batch, node, image):
// deterministic, so that creating it twice (a retry, a restarted
// controller) finds the first one instead of pulling twice.
func podName(ic *api.ImageCache, batch, node, image string) string {
	h := sha256.Sum256([]byte(string(ic.UID) + "\x00" + batch + "\x00" + node + "\x00" + image))
	prefix := ic.Name
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	prefix = strings.TrimRight(prefix, "-.")
	return prefix + "-" + hex.EncodeToString(h[:8])
}

// prepullPod builds the pod that makes the kubelet pull req.Image on
// req.Node with the cache's pull secrets. The kubelet checks and records
// the credential exactly as for any pod (KEP-2535), so only pods that hold
// the secret may later use the image. The image needs no shell or binary:
// an init container copies a static no-op program from the controller's own
// image into an emptyDir, and the pre-pull container runs it.
//
// The pod meets Pod Security "restricted" (v1.37): non-root 65534, seccomp
// RuntimeDefault, no privilege escalation, every capability dropped, only
// an emptyDir volume; each container has CPU and memory requests and
// limits. It is exactly the shape policy 2 of deploy/cluster/admission.yaml
// admits from the controller's service account: change both together.
func (c *Controller) prepullPod(ic *api.ImageCache, req imagecache.ImageWorkRequest) *corev1.Pod {
	policy := corev1.PullIfNotPresent
	if alwaysPull(req.Image) {
		policy = corev1.PullAlways
	}
	mount := []corev1.VolumeMount{{Name: "noop", MountPath: noopDir}}
	small := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(prepullCPURequest), corev1.ResourceMemory: resource.MustParse(prepullMemoryRequest)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(prepullCPULimit), corev1.ResourceMemory: resource.MustParse(prepullMemoryLimit)},
	}
	hardened := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(ic, ic.Status.Batch, req.Node, req.Image),
			Namespace: ic.Namespace,
			Labels: map[string]string{
				managedByLabel: managedByValue,
				cacheUIDLabel:  string(ic.UID),
				batchLabel:     ic.Status.Batch,
			},
			Annotations: map[string]string{imageAnno: req.Image, cacheAnno: cacheKey(ic)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: api.ImageCacheKind.GroupVersion().String(),
				Kind:       api.ImageCacheKind.Kind,
				Name:       ic.Name,
				UID:        ic.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:                      req.Node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			ImagePullSecrets:              ic.Spec.ImagePullSecrets,
			Tolerations:                   c.cfg.Placement.podTolerations(),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			PriorityClassName:             c.cfg.PriorityClassName,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:    ptr.To[int64](65534),
				RunAsGroup:   ptr.To[int64](65534),
				RunAsNonRoot: ptr.To(true),
				// Pod Security "restricted" asks for it, and admission.yaml
				// pins it: the kubelet's pull is all this pod does.
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: []corev1.Volume{{Name: "noop", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("32Mi"))},
			}}},
			InitContainers: []corev1.Container{{
				Name:            installContainer,
				Image:           c.cfg.NoopImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/pullrecords-noop", "install", noopPath},
				VolumeMounts:    mount,
				Resources:       small,
				SecurityContext: hardened,
			}},
			Containers: []corev1.Container{{
				Name:            prepullContainer,
				Image:           req.Image,
				ImagePullPolicy: policy,
				Command:         []string{noopPath},
				VolumeMounts:    []corev1.VolumeMount{{Name: "noop", MountPath: noopDir, ReadOnly: true}},
				Resources:       small,
				SecurityContext: hardened,
			}},
		},
	}
}

// pullFailureReasons are the kubelet's waiting reasons that end a pre-pull:
// the image could not be pulled and waiting longer will not change it
// before the kubelet's back-off retries, which this controller replaces by
// the next refresh.
var pullFailureReasons = map[string]bool{
	"ErrImagePull":              true,
	"ImagePullBackOff":          true,
	"InvalidImageName":          true,
	"ErrImageNeverPull":         true,
	"RegistryUnavailable":       true,
	"SignatureValidationFailed": true,
}

// outcome is what a pre-pull pod says about its pull.
type outcome struct {
	final   bool
	status  imagecache.ImageWorkStatus
	reason  string
	message string
}

// podOutcome reads a pre-pull pod's status. The image is pulled once the
// pre-pull container was created (running or terminated, whatever its exit
// code: only the pull matters). A pull error the kubelet reports ends the
// pull as failed with the kubelet's reason and message (a registry's 401 is
// in the message). A pod the node has not finished within deadline of its
// creation fails with what it last said.
func podOutcome(pod *corev1.Pod, now time.Time, deadline time.Duration) outcome {
	if pod.Status.Phase == corev1.PodSucceeded {
		return outcome{final: true, status: imagecache.StatusSucceeded}
	}
	var last *corev1.ContainerStateWaiting
	for _, cs := range pod.Status.InitContainerStatuses {
		if w := cs.State.Waiting; w != nil && pullFailureReasons[w.Reason] {
			return outcome{final: true, status: imagecache.StatusFailed, reason: "NoopImage" + w.Reason,
				message: fmt.Sprintf("the pre-pull helper image could not be pulled: %s", w.Message)}
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return outcome{final: true, status: imagecache.StatusFailed, reason: "NoopInstallFailed",
				message: fmt.Sprintf("the pre-pull helper exited %d: %s %s", t.ExitCode, t.Reason, t.Message)}
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != prepullContainer {
			continue
		}
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return outcome{final: true, status: imagecache.StatusSucceeded}
		}
		if w := cs.State.Waiting; w != nil {
			if pullFailureReasons[w.Reason] {
				return outcome{final: true, status: imagecache.StatusFailed, reason: w.Reason, message: w.Message}
			}
			last = w
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return outcome{final: true, status: imagecache.StatusFailed, reason: nonEmpty(pod.Status.Reason, "PodFailed"), message: pod.Status.Message}
	}
	if now.Sub(pod.CreationTimestamp.Time) >= deadline {
		if last != nil {
			return outcome{final: true, status: imagecache.StatusFailed, reason: nonEmpty(last.Reason, "PullDeadlineExceeded"),
				message: fmt.Sprintf("not pulled within %s: %s", deadline, waitingText(last))}
		}
		return outcome{final: true, status: imagecache.StatusFailed, reason: "Pending",
			message: fmt.Sprintf("the node reported nothing on the pre-pull pod within %s; check that the node is Ready and its kubelet runs", deadline)}
	}
	return outcome{status: imagecache.StatusJobCreated}
}

func nonEmpty(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

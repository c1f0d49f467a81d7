package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// Labels and annotations of pre-pull pods.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "pullrecords-controller"
	cacheUIDLabel  = "pullrecords.io/cache-uid"
	batchLabel     = "pullrecords.io/batch"
	// imageAnnoPrefix + a container's name is the annotation that names
	// the image that container pulls (admission.yaml pins the container's
	// image to it). One key per container, because CEL cannot parse JSON.
	imageAnnoPrefix = "pullrecords.io/image."
	cacheAnno       = "pullrecords.io/cache"

	prepullPrefix    = "prepull-" // container i of a pre-pull pod is prepull-<i>
	installContainer = "install-noop"
	noopDir          = "/pullrecords"
	noopPath         = noopDir + "/noop"
)

// Bounds of Config.MaxImagesPerPod; admission.yaml admits at most
// maxImagesPerPodLimit containers.
const (
	defaultMaxImagesPerPod = 32
	maxImagesPerPodLimit   = 64
)

// prepullName is the name of the container that pulls a pod's i-th image.
func prepullName(i int) string { return prepullPrefix + strconv.Itoa(i) }

// Resources of a pre-pull pod. Its quota cost is the pod-level
// resources (spec.resources, KEP-2837, feature gate PodLevelResources, beta
// and on by default since v1.34), the same whatever its number of images;
// each container carries small explicit requests and limits of its own,
// inside them. What the v1.37 API server and kubelet do with this shape,
// and why each number is what it is:
//
//   - Validation (pkg/apis/core/validation, validatePodResourceConsistency):
//     pod-level requests must be at least the containers' aggregate
//     requests (the sum of the regular containers', or the largest init
//     container's if more), and no container's limit may exceed the
//     pod-level limit of that resource. Pod-level resources may name only
//     cpu, memory and hugepages, and their requests may not exceed their
//     limits. So the pod-level requests are podCPURequest and
//     podMemoryRequest, at least maxImagesPerPodLimit times a container's
//     request, and a container's limits are below the pod's.
//   - Defaulting: a container's missing requests default to its limits
//     (SetDefaults_Pod). With PodLevelResourcesFixDefaulting (beta, on in
//     v1.37) the pod-level defaults (requests from the containers'
//     aggregate or from pod-level limits; limits from the containers') run
//     in PrepareForCreate, after mutating admission. Every value here is
//     set, so neither fills anything.
//   - ResourceQuota (pkg/quota/v1/evaluator/core/pods.go): with pod-level
//     resources set, Constraints no longer asks every container for cpu and
//     memory requests and limits, and the usage is PodRequests/PodLimits,
//     in which the pod-level values replace the containers' sum for cpu and
//     memory. A pod is charged exactly podCPURequest, podMemoryRequest,
//     podCPULimit and podMemoryLimit (requests.*, limits.*), for 1 image or
//     64. Other resources (ephemeral-storage) are still summed over the
//     containers.
//   - LimitRanger (plugin/pkg/admission/limitranger): its defaulting does
//     not look at pod-level resources. A LimitRange's container default and
//     defaultRequest are written into every container lacking that
//     resource, and would then break the pod's validation: 65 default
//     requests exceed the pod-level requests, and a default limit may exceed
//     the pod-level limit. Hence each container's own cpu and memory
//     requests and limits, which leave it nothing to default (it may still
//     default ephemeral-storage; admission.yaml allows that). Its container
//     min and max apply to each container as before; its Pod min and max
//     compare the pod-level values.
//   - Kubelet: the pod cgroup's CPU quota and memory.max are the pod-level
//     limits (ResourceConfigForPod), which bound the pre-pull containers
//     together; each container's cgroup keeps its own smaller limits. A
//     kubelet with the gate disabled refuses the pod at admission (pod
//     Failed, reason PodLevelResourcesNotSupported), which the cache shows
//     as that image's failure.
//   - An API server with the gate disabled drops spec.resources before
//     validating admission; admission.yaml's policy 2 then denies the pod
//     (the cache fails with reason AdmissionPolicyDenied and a Warning
//     event), rather than letting it count up to 64 containers' limits.
//
// admission.yaml (policy 2) bounds the pod-level values at 200m and 256Mi
// (limits) and 100m and 128Mi (requests), and each container's at 100m and
// 64Mi (limits) and 4m and 4Mi (requests): keep these below those.
const (
	// Each container's. A container's limits are what one no-op start
	// needs (runc's init joins the container's cgroup before the no-op).
	prepullCPURequest    = "1m"
	prepullMemoryRequest = "1Mi"
	prepullCPULimit      = "50m"
	prepullMemoryLimit   = "32Mi"
	// The pod's, the quota's charge. The requests are maxImagesPerPodLimit
	// times a container's (validation's floor for 64 images); the limits
	// leave room for the kubelet starting several no-ops at once when every
	// image is present.
	podCPURequest    = "64m"
	podMemoryRequest = "64Mi"
	podCPULimit      = "100m"
	podMemoryLimit   = "128Mi"
)

// podName is the pre-pull pod's name for one (cache, batch, node) and the
// images it pulls, in order: deterministic, so that creating it twice (a
// retry, a restarted controller) finds the first one instead of pulling
// twice, and distinct for every other image set.
func podName(ic *api.ImageCache, batch, node string, images []string) string {
	h := sha256.New()
	// Each part length-prefixed: no two lists of names hash alike.
	for _, part := range append([]string{string(ic.UID), batch, node}, images...) {
		h.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	sum := h.Sum(nil)
	prefix := ic.Name
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	prefix = strings.TrimRight(prefix, "-.")
	return prefix + "-" + hex.EncodeToString(sum[:8])
}

// podImages returns the image each pre-pull container of pod pulls, by
// container name, from its spec: only containers named as prepullPod
// names them, whose image the pod's annotation names too (admission pins
// both; a pod that disagrees is not read as pulling anything).
func podImages(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, ct := range pod.Spec.Containers {
		if strings.HasPrefix(ct.Name, prepullPrefix) && pod.Annotations[imageAnnoPrefix+ct.Name] == ct.Image {
			out[ct.Name] = ct.Image
		}
	}
	return out
}

// prepullPod builds the pod that makes the kubelet pull images (at most
// MaxImagesPerPod, one container each, prepull-0, prepull-1, ... in order)
// on node with the cache's pull secrets. The kubelet checks and records
// each image's credential exactly as for any pod (KEP-2535), so only pods
// that hold the secret may later use the image. The kubelet starts the
// containers in order, pulling each image just before; one image's failed
// pull does not keep the others from starting. The images need no shell or
// binary: an init container copies a static no-op program from the
// controller's own image into an emptyDir, and every pre-pull container
// runs it.
//
// The pod meets Pod Security "restricted" (v1.37): non-root 65534, seccomp
// RuntimeDefault, no privilege escalation, every capability dropped, only
// an emptyDir volume. Its CPU and memory requests and limits are set at
// pod level, and small ones on each container (see podCPULimit). It is
// exactly the shape policy 2 of deploy/cluster/admission.yaml
// admits from the controller's service account: change both together.
func (c *Controller) prepullPod(ic *api.ImageCache, node string, images []string) *corev1.Pod {
	small := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(prepullCPURequest), corev1.ResourceMemory: resource.MustParse(prepullMemoryRequest)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(prepullCPULimit), corev1.ResourceMemory: resource.MustParse(prepullMemoryLimit)},
	}
	hardened := func() *corev1.SecurityContext {
		return &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	annotations := map[string]string{cacheAnno: cacheKey(ic)}
	containers := make([]corev1.Container, 0, len(images))
	for i, image := range images {
		policy := corev1.PullIfNotPresent
		if alwaysPull(image) {
			policy = corev1.PullAlways
		}
		name := prepullName(i)
		annotations[imageAnnoPrefix+name] = image
		containers = append(containers, corev1.Container{
			Name:            name,
			Image:           image,
			ImagePullPolicy: policy,
			Command:         []string{noopPath},
			VolumeMounts:    []corev1.VolumeMount{{Name: "noop", MountPath: noopDir, ReadOnly: true}},
			Resources:       *small.DeepCopy(),
			SecurityContext: hardened(),
		})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(ic, ic.Status.Batch, node, images),
			Namespace: ic.Namespace,
			Labels: map[string]string{
				managedByLabel: managedByValue,
				cacheUIDLabel:  string(ic.UID),
				batchLabel:     ic.Status.Batch,
			},
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: api.ImageCacheKind.GroupVersion().String(),
				Kind:       api.ImageCacheKind.Kind,
				Name:       ic.Name,
				UID:        ic.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:                      node,
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
				VolumeMounts:    []corev1.VolumeMount{{Name: "noop", MountPath: noopDir}},
				Resources:       small,
				SecurityContext: hardened(),
			}},
			Containers: containers,
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(podCPURequest), corev1.ResourceMemory: resource.MustParse(podMemoryRequest)},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(podCPULimit), corev1.ResourceMemory: resource.MustParse(podMemoryLimit)},
			},
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

// podOutcomes reads a pre-pull pod's status for each of its images (by
// the name of the container that pulls it, see podImages).
func podOutcomes(pod *corev1.Pod, now time.Time, deadline time.Duration) map[string]api.Outcome {
	out := map[string]api.Outcome{}
	for name := range podImages(pod) {
		out[name] = containerOutcome(pod, name, now, deadline)
	}
	return out
}

// allFinal reports whether every image of a pod has its final outcome.
func allFinal(outs map[string]api.Outcome) bool {
	for _, o := range outs {
		if !o.Final() {
			return false
		}
	}
	return true
}

// containerOutcome reads the pull of the image of container name from a
// pre-pull pod's status. The image is pulled once its container was
// created (running or terminated, whatever its exit code: only the pull
// matters). A pull error the kubelet reports for that container ends its
// pull as failed with the kubelet's reason and message (a registry's 401
// is in the message); the other containers are not affected. The helper
// init container failing fails every image of the pod. An image still
// waiting when the pod made no progress for deadline (lastProgress: the
// kubelet pulls a pod's images one after another, so each pull gets the
// deadline, not the pod) fails with what its container last said.
func containerOutcome(pod *corev1.Pod, name string, now time.Time, deadline time.Duration) api.Outcome {
	if pod.Status.Phase == corev1.PodSucceeded {
		return api.Outcome{Status: api.WorkSucceeded}
	}
	var last *corev1.ContainerStateWaiting
	for _, cs := range pod.Status.InitContainerStatuses {
		if w := cs.State.Waiting; w != nil && pullFailureReasons[w.Reason] {
			return api.Outcome{Status: api.WorkFailed, Reason: "NoopImage" + w.Reason,
				Message: fmt.Sprintf("the pre-pull helper image could not be pulled: %s", w.Message)}
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return api.Outcome{Status: api.WorkFailed, Reason: "NoopInstallFailed",
				Message: fmt.Sprintf("the pre-pull helper exited %d: %s %s", t.ExitCode, t.Reason, t.Message)}
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != name {
			continue
		}
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return api.Outcome{Status: api.WorkSucceeded}
		}
		if w := cs.State.Waiting; w != nil {
			if pullFailureReasons[w.Reason] {
				return api.Outcome{Status: api.WorkFailed, Reason: w.Reason, Message: w.Message}
			}
			last = w
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return api.Outcome{Status: api.WorkFailed, Reason: nonEmpty(pod.Status.Reason, "PodFailed"), Message: pod.Status.Message}
	}
	if now.Sub(lastProgress(pod)) >= deadline {
		if last != nil {
			return api.Outcome{Status: api.WorkFailed, Reason: nonEmpty(last.Reason, "PullDeadlineExceeded"),
				Message: fmt.Sprintf("not pulled within %s: %s", deadline, waitingText(last))}
		}
		return api.Outcome{Status: api.WorkFailed, Reason: "Pending",
			Message: fmt.Sprintf("the node reported nothing on the pre-pull pod within %s; check that the node is Ready and its kubelet runs", deadline)}
	}
	return api.Outcome{Status: api.WorkJobCreated}
}

// lastProgress is when the pod last moved: its creation, or the latest
// start or finish of any of its containers. The kubelet pulls each
// container's image just before starting it, in order.
func lastProgress(pod *corev1.Pod) time.Time {
	t := pod.CreationTimestamp.Time
	later := func(m metav1.Time) {
		if m.After(t) {
			t = m.Time
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if r := cs.State.Running; r != nil {
				later(r.StartedAt)
			}
			if x := cs.State.Terminated; x != nil {
				later(x.StartedAt)
				later(x.FinishedAt)
			}
		}
	}
	return t
}

func nonEmpty(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

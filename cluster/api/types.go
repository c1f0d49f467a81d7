package api

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and versions of the two resources.
const (
	// KubeFledgedGroup is kube-fledged's API group; the ImageCache CRD keeps
	// it so that existing manifests and objects are adopted in place.
	KubeFledgedGroup = "kubefledged.io"
	// ImageCacheVersion is the only version served, as in kube-fledged.
	ImageCacheVersion = "v1alpha2"
	// Group is this project's group, for the per-node objects.
	Group = "pullrecords.io"
	// NodeImagesVersion is the version of NodeImages.
	NodeImagesVersion = "v1alpha1"
)

// GroupVersionResources, for dynamic clients and informers.
var (
	ImageCacheResource = schema.GroupVersionResource{Group: KubeFledgedGroup, Version: ImageCacheVersion, Resource: "imagecaches"}
	NodeImagesResource = schema.GroupVersionResource{Group: Group, Version: NodeImagesVersion, Resource: "nodeimages"}
	ImageCacheKind     = schema.GroupVersionKind{Group: KubeFledgedGroup, Version: ImageCacheVersion, Kind: "ImageCache"}
	NodeImagesKind     = schema.GroupVersionKind{Group: Group, Version: NodeImagesVersion, Kind: "NodeImages"}
)

// Annotations a user adds to an ImageCache to ask for an action; the
// controller removes them when the action's status is written.
const (
	RefreshAnnotation = "kubefledged.io/refresh-imagecache"
	PurgeAnnotation   = "kubefledged.io/purge-imagecache"
)

// ImageCache is kube-fledged's resource, field for field: images to keep on
// the nodes that match each cacheSpec entry's selector, pulled with the
// cache's pull secrets. The status adds counts and an observed generation
// (fields kube-fledged does not have and ignores).
type ImageCache struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ImageCacheSpec   `json:"spec"`
	Status ImageCacheStatus `json:"status,omitempty"`
}

// ImageCacheSpec is what to cache where.
type ImageCacheSpec struct {
	CacheSpec        []CacheSpecImages             `json:"cacheSpec"`
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// CacheSpecImages lists images for the nodes matching NodeSelector (all
// nodes when it is empty).
type CacheSpecImages struct {
	Images       []string          `json:"images"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// ImageCacheStatus is the outcome of the cache's latest action.
type ImageCacheStatus struct {
	Status         ImageCacheActionStatus           `json:"status,omitempty"`
	Reason         string                           `json:"reason,omitempty"`
	Message        string                           `json:"message,omitempty"`
	Failures       map[string]NodeReasonMessageList `json:"failures,omitempty"`
	StartTime      *metav1.Time                     `json:"startTime,omitempty"`
	CompletionTime *metav1.Time                     `json:"completionTime,omitempty"`

	// Fields below are this project's; kube-fledged neither writes nor reads them.

	// ObservedGeneration is the spec generation the latest action worked on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Batch names the latest action; per-node results carry it.
	Batch string `json:"batch,omitempty"`
	// Counts of the latest action's (node, image) results by result status.
	Counts *ResultCounts `json:"counts,omitempty"`
}

// ResultCounts counts an action's (node, image) results.
type ResultCounts struct {
	Desired       int32 `json:"desired"`
	Succeeded     int32 `json:"succeeded"`
	AlreadyPulled int32 `json:"alreadyPulled"`
	Failed        int32 `json:"failed"`
	Unknown       int32 `json:"unknown"`
	InFlight      int32 `json:"inFlight"`
	// Skipped counts pairs on nodes the controller's placement rules keep
	// pre-pull pods off (cordoned, control-plane, not Ready, a taint not
	// tolerated): neither pulled nor failed; the message names the nodes.
	Skipped int32 `json:"skipped,omitempty"`
	// FailuresOmitted counts failures left out of Failures by the per-image cap.
	FailuresOmitted int32 `json:"failuresOmitted,omitempty"`
}

// NodeReasonMessage is one failure on one node (node is the node's name).
type NodeReasonMessage struct {
	Node    string `json:"node"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// NodeReasonMessageList is the failures of one image.
type NodeReasonMessageList []NodeReasonMessage

// ImageCacheActionStatus is kube-fledged's status of an action.
type ImageCacheActionStatus string

// kube-fledged's action statuses.
const (
	ActionStatusProcessing              ImageCacheActionStatus = "Processing"
	ActionStatusSucceeded               ImageCacheActionStatus = "Succeeded"
	ActionStatusFailed                  ImageCacheActionStatus = "Failed"
	ActionStatusUnknown                 ImageCacheActionStatus = "Unknown"
	ActionStatusAborted                 ImageCacheActionStatus = "Aborted"
	ActionStatusNoImagesPulledOrDeleted ImageCacheActionStatus = "NoImagesPulledOrDeleted"
)

// kube-fledged's reasons; the action reasons stay on the status for the
// whole action, as kube-fledged's do.
const (
	ReasonImageCacheCreate          = "ImageCacheCreate"
	ReasonImageCacheUpdate          = "ImageCacheUpdate"
	ReasonImageCacheRefresh         = "ImageCacheRefresh"
	ReasonImageCachePurge           = "ImageCachePurge"
	ReasonImageCacheDelete          = "ImageCacheDelete"
	ReasonCacheSpecValidationFailed = "CacheSpecValidationFailed"
	ReasonImagePullStatusUnknown    = "ImagePullStatusUnknown"
	ReasonImagePullAborted          = "ImagePullAborted"
)

// NodeImages is the per-node object: one per node, named after it, owned by
// its Node. The controller writes the spec (what caches want on the node)
// and the results in the status; the node's agent writes presence and its
// heartbeat in the status. Each writer owns its fields through server-side
// apply, so neither overwrites the other.
type NodeImages struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeImagesSpec   `json:"spec,omitempty"`
	Status NodeImagesStatus `json:"status,omitempty"`
}

// NodeImagesSpec is what caches want on one node.
type NodeImagesSpec struct {
	// Images to keep, each with the caches (namespace/name) that want it.
	Images []NodeImage `json:"images,omitempty"`
	// Purge lists images to remove from the node: no cache wants them any
	// more (a cache was deleted, purged or updated) and some cache's own
	// pre-pull put them there. Pulled names the images to remove by ID; an
	// image every cache found present is never listed.
	Purge []NodeImage `json:"purge,omitempty"`
}

// NodeImage is one image on one node and the caches behind it.
type NodeImage struct {
	Image string `json:"image"`
	// Caches are the caches (namespace/name) that want the image; empty in
	// a purge entry.
	Caches []string `json:"caches,omitempty"`
	// Pulled records the caches whose own pre-pull put the image on the
	// node, one per cache UID. Only these records make a purge: a cache
	// that found the image present has none.
	Pulled []PullRecord `json:"pulled,omitempty"`
}

// PullRecord says that one cache's pre-pull pulled the image on the node:
// the agent reported the image absent when the pre-pull pod was created
// (batch Batch), and, once the pod's pull succeeded, ImageRef is the image
// the kubelet reported for it (the pod's imageID). A record without
// ImageRef is a pull in flight or one that failed; it removes nothing.
type PullRecord struct {
	Cache    string `json:"cache"`
	CacheUID string `json:"cacheUID"`
	Batch    string `json:"batch,omitempty"`
	ImageRef string `json:"imageRef,omitempty"`
}

// NodeImagesStatus is what is known on one node.
type NodeImagesStatus struct {
	// Agent is the node agent's report; nil when no agent runs there.
	Agent *AgentStatus `json:"agent,omitempty"`
	// Images is the agent's presence report for every image of the spec.
	Images []ImagePresence `json:"images,omitempty"`
	// Results are the controller's per-(cache, image) results on this node.
	Results []NodeResult `json:"results,omitempty"`
}

// AgentStatus is the agent's heartbeat and image filesystem use.
type AgentStatus struct {
	HeartbeatTime      metav1.Time `json:"heartbeatTime"`
	ObservedGeneration int64       `json:"observedGeneration"`
	RuntimeVersion     string      `json:"runtimeVersion,omitempty"`
	ImageFsUsedBytes   int64       `json:"imageFsUsedBytes,omitempty"`
	ImageFsTotalBytes  int64       `json:"imageFsTotalBytes,omitempty"`
}

// ImagePresence is the runtime's answer for one image (CRI ImageStatus).
type ImagePresence struct {
	Image    string `json:"image"`
	Present  bool   `json:"present"`
	ImageRef string `json:"imageRef,omitempty"`
	Size     int64  `json:"size,omitempty"`
	// RemoveError is the runtime's error from the latest RemoveImage, if any.
	RemoveError string `json:"removeError,omitempty"`
	// Kept, on a purge entry, says why the agent left the image on the node
	// (one of the Kept* reasons, or KeptOtherTags with the tags). Every
	// reason but KeptInUse is final for the entry; an image in use is
	// removed once no container uses it.
	Kept string `json:"kept,omitempty"`
}

// Why an agent keeps a purge image (ImagePresence.Kept).
const (
	KeptByCache  = "another ImageCache keeps it"
	KeptPinned   = "pinned by the runtime"
	KeptInUse    = "in use by a container"
	KeptNoRecord = "no cache's pull of it is recorded"
	// KeptOtherTags is followed by the tags, in parentheses.
	KeptOtherTags = "it has other tags on the node"
)

// NodeResult is one (cache, image) result on this node, for one batch.
type NodeResult struct {
	// Cache is namespace/name; CacheUID tells apart a cache deleted and
	// created again under the same name.
	Cache    string `json:"cache"`
	CacheUID string `json:"cacheUID"`
	Image    string `json:"image"`
	Batch    string `json:"batch"`
	// Work is the action's kube-fledged work type.
	Work WorkType `json:"work"`
	// Outcome is kube-fledged's status (succeeded, failed, alreadypulled,
	// unknown; never jobcreated: only final results are written), reason
	// and message.
	Outcome `json:",inline"`
	Time    metav1.Time `json:"time"`
}

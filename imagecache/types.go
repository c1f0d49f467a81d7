package imagecache

import (
	"time"
)

// WorkType is the kind of work a request or a batch does. The values are the
// seed's (kube-fledged) vocabulary, except its "statusupdate": kube-fledged
// queues that to refresh a cache's status once its jobs end, and here every
// batch's end is delivered as a CacheStatus instead, so no request does
// that work.
type WorkType string

// Work types.
const (
	// WorkTypeCreate pulls the images of a newly applied cache.
	WorkTypeCreate WorkType = "create"
	// WorkTypeUpdate pulls images added to a cache (and all of them when its
	// credentials or ForceFullCache changed).
	WorkTypeUpdate WorkType = "update"
	// WorkTypeDelete removes the images of a deleted cache that no other
	// cache keeps.
	WorkTypeDelete WorkType = "delete"
	// WorkTypeRefresh re-checks every image of a cache and pulls what is
	// missing or not recorded for the cache's credentials.
	WorkTypeRefresh WorkType = "refresh"
	// WorkTypePurge removes an image an update dropped from a cache, unless
	// another cache keeps it.
	WorkTypePurge WorkType = "purge"
)

// ImageWorkStatus is the outcome of one request.
type ImageWorkStatus string

// Result statuses (the seed's vocabulary).
const (
	// StatusSucceeded: the image was pulled (or removed) as asked.
	StatusSucceeded ImageWorkStatus = "succeeded"
	// StatusFailed: the work failed permanently or ran out of retries.
	StatusFailed ImageWorkStatus = "failed"
	// StatusJobCreated: the work has started and has not finished. It is
	// only ever a count in CacheStatus, never a final result.
	StatusJobCreated ImageWorkStatus = "jobcreated"
	// StatusAlreadyPulled: the runtime has the image and the pull manager
	// already records it for the cache's credentials, so nothing was pulled.
	StatusAlreadyPulled ImageWorkStatus = "alreadypulled"
	// StatusUnknown: the work's outcome is unknown: it was cancelled at
	// shutdown, or superseded by a later change of the cache.
	StatusUnknown ImageWorkStatus = "unknown"
)

// Reasons set on results.
const (
	ReasonPulled         = "Pulled"
	ReasonAlreadyPresent = "AlreadyPresent"
	ReasonRemoved        = "Removed"
	ReasonNotPresent     = "NotPresent"
	ReasonKeptByOther    = "KeptByOtherCache"
	ReasonPullFailed     = "PullFailed"
	ReasonUnauthorized   = "Unauthorized"
	ReasonTimeout        = "DeadlineExceeded"
	ReasonStatusFailed   = "ImageStatusFailed"
	ReasonRemoveFailed   = "RemoveFailed"
	ReasonIntentFailed   = "RecordIntentFailed"
	ReasonRecordFailed   = "RecordDeleteFailed"
	ReasonShutDown       = "ShutDown"
	ReasonSuperseded     = "Superseded"
	// ReasonPrivateImage: a standalone manager does not pull a cache with
	// a pull secret (PrivateImageError).
	ReasonPrivateImage = "PrivateImageRefused"
	// ReasonDockerConfigError: the docker config of the cache's pull
	// secret (PullSecret.DockerConfigPath) could not be read or parsed;
	// nothing was pulled.
	ReasonDockerConfigError = "DockerConfigError"
	// ReasonNoCredentials: the docker config of the cache's pull secret has
	// no entry for the image's registry; nothing was pulled (never
	// anonymously).
	ReasonNoCredentials = "NoCredentialsForRegistry"
)

// Mode says how a Manager records its pulls.
type Mode string

const (
	// ModeInProcess: made by New with a pull manager over a store this
	// process holds the lock of (for example inside a kubelet built on this
	// library). Every pull is recorded, private images (a cache with a pull
	// secret) included, and purges prune records.
	ModeInProcess Mode = "in-process"
	// ModeStandalone: made by NewStandalone, without a pull manager, for a
	// process beside a kubelet it does not control. It writes no pull
	// record and no intent, pulls anonymously only, and refuses caches
	// with a pull secret (PrivateImageError).
	ModeStandalone Mode = "standalone"
)

// CacheRef names an image cache.
type CacheRef struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (r CacheRef) String() string { return r.Namespace + "/" + r.Name }

// PullSecret is a cache's registry credential and the coordinates of the
// Kubernetes secret it came from (Namespace, Name, UID: what the pull
// record names). The credential is given one of two ways:
//
//   - Inline: Username, Password and Email, the fields the kubelet reads
//     from one entry of a docker config secret. They are used for every
//     image of the cache, and persisted as they are in the state directory
//     (WithStateDir), password included.
//   - By path: DockerConfigPath, with the inline fields empty. The
//     credential is read at each pull and picked for the image's registry
//     as the kubelet picks it from the same secret; the state directory
//     holds only the path.
//
// Either way the credential hash recorded for a pull is the one the kubelet
// records for a pod pulling with that secret. Setting both ways is an
// ErrInvalidPullSecret error from Apply.
type PullSecret struct {
	Namespace string
	Name      string
	UID       string

	Username string
	Password string
	Email    string

	// DockerConfigPath is the absolute path of a docker config: a file in
	// the ~/.docker/config.json form ({"auths": {"<registry>": {...}}}, as
	// a secret's .dockerconfigjson) or the legacy ~/.dockercfg form (the
	// map of registries alone); or a directory where a secret of type
	// kubernetes.io/dockerconfigjson (key .dockerconfigjson) or
	// kubernetes.io/dockercfg (key .dockercfg) is mounted. It is re-read at
	// every pull, so a rotated secret is used from the next pull on.
	//
	// For each image the entries matching its registry are tried in the
	// kubelet's order (most specific first), and the one the pull succeeds
	// with is recorded. An image no entry matches is not pulled (reason
	// ReasonNoCredentials): a cache with a pull secret never pulls
	// anonymously. A file that is missing, unreadable, not a docker config
	// or larger than 1 MiB fails the pull (reason ReasonDockerConfigError)
	// with a message naming the file and holding none of its content.
	DockerConfigPath string `json:",omitempty"`
}

// ImageCache is a namespaced, named set of images kept on the node.
type ImageCache struct {
	Namespace string
	Name      string
	// Images are image references as a pod would write them. Duplicates are
	// ignored; order is kept for dispatch.
	Images []string
	// ForceFullCache pulls even when the image is present and recorded.
	ForceFullCache bool
	// PullSecret is the credential to pull with; nil pulls anonymously, and
	// an anonymous pull makes the image usable by every pod on the node.
	PullSecret *PullSecret
	// RefreshInterval re-checks the cache this often while Run runs; zero
	// disables periodic refresh.
	RefreshInterval time.Duration
}

// Ref returns the cache's namespace/name.
func (c ImageCache) Ref() CacheRef { return CacheRef{Namespace: c.Namespace, Name: c.Name} }

// ImageWorkRequest is one unit of work for one image on this node.
type ImageWorkRequest struct {
	Image                   string
	Node                    string
	ContainerRuntimeVersion string
	WorkType                WorkType
	ForceFullCache          bool
	ImageCache              CacheRef
}

// ImageWorkResult is the final outcome of one request. Every request gets
// exactly one.
type ImageWorkResult struct {
	Request ImageWorkRequest
	Status  ImageWorkStatus
	Reason  string
	Message string
	// ImageRef is the image ID pulled, found present, or removed.
	ImageRef string
	// Started is when the first attempt began (zero if none did), Finished
	// when the result was decided, Duration the time in between.
	Started  time.Time
	Finished time.Time
	Duration time.Duration
	// Attempts counts the attempts made (retries included).
	Attempts int
}

// CacheStatus is a per-cache completion (the seed's statusupdate): the
// progress and results of the latest batch of work queued for a cache by
// Apply, Delete, Refresh or a resume after restart.
type CacheStatus struct {
	ImageCache CacheRef
	// WorkType is the batch's action: create, update, delete, refresh, or
	// purge (a batch that only removes images dropped by an update).
	WorkType WorkType
	// Batch numbers batches in the order they were queued (per manager run).
	Batch    uint64
	Complete bool
	Started  time.Time
	Finished time.Time
	Duration time.Duration
	// Requests is the number of requests in the batch; Queued of them wait,
	// InFlight of them are being worked on.
	Requests int
	Queued   int
	InFlight int
	// Counts holds final results per status, plus StatusJobCreated for the
	// requests in flight.
	Counts map[ImageWorkStatus]int
	// Results are the final results so far, in request order.
	Results []ImageWorkResult
}

// Failed reports whether any finished request failed or ended unknown.
func (s CacheStatus) Failed() bool {
	return s.Counts[StatusFailed] > 0 || s.Counts[StatusUnknown] > 0
}

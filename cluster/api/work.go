package api

// WorkType is kube-fledged's name for what an action does to each (node,
// image) it covers. It is written into every NodeResult, so its values are
// kube-fledged's strings.
type WorkType string

// Work types, kube-fledged's.
const (
	WorkCreate  WorkType = "create"
	WorkUpdate  WorkType = "update"
	WorkRefresh WorkType = "refresh"
	WorkPurge   WorkType = "purge"
	WorkDelete  WorkType = "delete"
)

// WorkTypeFor is the work type of an action, given its reason (the
// status's reason at the action's start): kube-fledged's mapping. A reason
// that names no action (a validation failure, say) maps to create.
func WorkTypeFor(reason string) WorkType {
	switch reason {
	case ReasonImageCacheUpdate:
		return WorkUpdate
	case ReasonImageCacheRefresh:
		return WorkRefresh
	case ReasonImageCachePurge:
		return WorkPurge
	case ReasonImageCacheDelete:
		return WorkDelete
	default:
		return WorkCreate
	}
}

// WorkStatus is kube-fledged's status of one (node, image) of an action.
type WorkStatus string

// Work statuses, kube-fledged's. Only JobCreated is not final: the image's
// pre-pull pod exists and has not answered yet.
const (
	WorkSucceeded     WorkStatus = "succeeded"
	WorkFailed        WorkStatus = "failed"
	WorkJobCreated    WorkStatus = "jobcreated"
	WorkAlreadyPulled WorkStatus = "alreadypulled"
	WorkUnknown       WorkStatus = "unknown"
)

// Outcome is the one form a (node, image) result takes from the moment it
// is read off a pre-pull pod's status (or decided without a pod) until it
// is counted into the cache's status: kube-fledged's status with the
// kubelet's, the agent's or the controller's reason and message. A
// NodeResult is an Outcome with the (cache, image, batch) it belongs to.
type Outcome struct {
	Status  WorkStatus `json:"status"`
	Reason  string     `json:"reason,omitempty"`
	Message string     `json:"message,omitempty"`
}

// Final reports whether the outcome ends its (node, image) for the action.
func (o Outcome) Final() bool { return o.Status != WorkJobCreated && o.Status != "" }

package pullmanager

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// ImagePullManager keeps track of image pulls and decides whether a pod must
// prove to the registry that it may use an image already on the node.
//
// Every successful RecordPullIntent must be followed by exactly one
// RecordImagePulled or RecordImagePullFailed for the same image string.
type ImagePullManager interface {
	// RecordPullIntent records that image (the pod's image string, verbatim)
	// is about to be pulled. It must be called before the pull starts.
	RecordPullIntent(logger klog.Logger, image string) error
	// RecordImagePulled records that image was pulled as imageRef with
	// credentials. nil credentials record the pull without credentials
	// (the next check must re-verify).
	RecordImagePulled(ctx context.Context, image, imageRef string, credentials *accessor.ImagePullCredentials)
	// RecordImagePullFailed records that the pull of image ended in failure.
	RecordImagePullFailed(ctx context.Context, image string)
	// MustAttemptImagePull reports whether a pod asking for image, present on
	// the node as imageRef, must pull it (prove its credentials) before use.
	// It fails safe: any error reading records means true. Only a failure of
	// getPodCredentials is returned as an error.
	MustAttemptImagePull(ctx context.Context, image, imageRef string, getPodCredentials GetPodCredentials) (bool, error)
	// PruneUnknownRecords deletes pulled records last updated before until
	// whose imageRef is not in imageList. until must be taken before the image
	// list is fetched from the runtime.
	PruneUnknownRecords(ctx context.Context, imageList []string, until time.Time)
}

// GetPodCredentials returns the pod's pull secrets and the service account
// whose token the pod would use for registry credentials (nil if none). It is
// called lazily, only when a decision needs it.
type GetPodCredentials func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error)

// ImagePullPolicyEnforcer decides whether credentials must be verified for an
// image, given whether the kubelet (rather than a preloading step) pulled it.
type ImagePullPolicyEnforcer interface {
	RequireCredentialVerificationForImage(image string, imagePulledByKubelet bool) bool
}

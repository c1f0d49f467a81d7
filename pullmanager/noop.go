package pullmanager

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// NoopImagePullManager is the manager to use when the feature is off: it
// records nothing and never asks for a pull.
type NoopImagePullManager struct{}

var _ ImagePullManager = NoopImagePullManager{}

// RecordPullIntent does nothing.
func (NoopImagePullManager) RecordPullIntent(klog.Logger, string) error { return nil }

// RecordImagePulled does nothing.
func (NoopImagePullManager) RecordImagePulled(context.Context, string, string, *accessor.ImagePullCredentials) {
}

// RecordImagePullFailed does nothing.
func (NoopImagePullManager) RecordImagePullFailed(context.Context, string) {}

// MustAttemptImagePull always returns (false, nil) and never calls
// getPodCredentials.
func (NoopImagePullManager) MustAttemptImagePull(context.Context, string, string, GetPodCredentials) (bool, error) {
	return false, nil
}

// PruneUnknownRecords does nothing.
func (NoopImagePullManager) PruneUnknownRecords(context.Context, []string, time.Time) {}

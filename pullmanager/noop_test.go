package pullmanager

import (
	"testing"
	"time"
)

func TestNoopImagePullManager(t *testing.T) {
	ctx, logger := testCtx(t)
	var m ImagePullManager = NoopImagePullManager{}
	if err := m.RecordPullIntent(logger, imgX); err != nil {
		t.Error(err)
	}
	m.RecordImagePulled(ctx, imgX, refA, nil)
	m.RecordImagePullFailed(ctx, imgX)
	m.PruneUnknownRecords(ctx, nil, time.Now())
	calls := 0
	got, err := m.MustAttemptImagePull(ctx, imgX, refA, podCreds(&calls, nil, nil, nil))
	if got || err != nil || calls != 0 {
		t.Errorf("MustAttemptImagePull = %v, %v (credentials asked %d times), want false, nil, 0", got, err, calls)
	}
}

package pullmanager

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
)

// policyFunc adapts a function to ImagePullPolicyEnforcer.
type policyFunc func(image string, imagePulledByKubelet bool) bool

// RequireCredentialVerificationForImage calls f.
func (f policyFunc) RequireCredentialVerificationForImage(image string, imagePulledByKubelet bool) bool {
	return f(image, imagePulledByKubelet)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testCtx(t *testing.T) (context.Context, klog.Logger) {
	logger, ctx := ktesting.NewTestContext(t)
	return ctx, logger
}

func mustPolicy(t testing.TB, p VerificationPolicy, allowlist ...string) ImagePullPolicyEnforcer {
	t.Helper()
	e, err := NewImagePullCredentialVerificationPolicy(p, allowlist)
	if err != nil {
		t.Fatalf("NewImagePullCredentialVerificationPolicy(%q, %q): %v", p, allowlist, err)
	}
	return e
}

func newTestManager(t *testing.T, store accessor.PullRecordsAccessor, policy ImagePullPolicyEnforcer, opts ...Option) (*PullManager, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	ctx, _ := testCtx(t)
	m, err := NewImagePullManager(ctx, store, policy, nil, append([]Option{WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("NewImagePullManager: %v", err)
	}
	return m, clk
}

func secret(uid, ns, name, hash string) accessor.ImagePullSecret {
	return accessor.ImagePullSecret{UID: uid, Namespace: ns, Name: name, CredentialHash: hash}
}

func sa(uid, ns, name string) accessor.ImagePullServiceAccount {
	return accessor.ImagePullServiceAccount{UID: uid, Namespace: ns, Name: name}
}

func rec(ref string, at time.Time, mapping map[string]accessor.ImagePullCredentials) *accessor.ImagePulledRecord {
	if mapping == nil {
		mapping = map[string]accessor.ImagePullCredentials{}
	}
	return &accessor.ImagePulledRecord{ImageRef: ref, LastUpdatedTime: metav1.NewTime(at), CredentialMapping: mapping}
}

// podCreds returns a GetPodCredentials that counts its calls.
func podCreds(calls *int, secrets []accessor.ImagePullSecret, sa *accessor.ImagePullServiceAccount, err error) GetPodCredentials {
	return func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		*calls++
		return secrets, sa, err
	}
}

// checkCounts returns the mustpull check counter per result.
func checkCounts(m *Metrics) map[string]float64 {
	out := map[string]float64{}
	for r := checkResult(0); r < numResults; r++ {
		if v := counterValue(m.checkByCode[r]); v != 0 {
			out[resultLabels[r]] = v
		}
	}
	return out
}

func counterValue(c prometheus.Metric) float64 {
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		panic(err)
	}
	switch {
	case out.Counter != nil:
		return out.Counter.GetValue()
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	case out.Histogram != nil:
		return float64(out.Histogram.GetSampleCount())
	}
	return 0
}

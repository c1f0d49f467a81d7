package crishim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestClassify(t *testing.T) {
	errUnreachable := errors.New("unreachable")
	errInvalid := errors.New("invalid")
	errNotProven := errors.New("not proven")
	classify := ClassifyBySentinels(errDenied, errNotFound, errUnreachable, errInvalid, errNotProven)
	for _, tc := range []struct {
		err  error
		want Result
	}{
		{fmt.Errorf("x: %w", errDenied), ResultDenied},
		{fmt.Errorf("x: %w", errNotFound), ResultNotFound},
		{fmt.Errorf("x: %w", errUnreachable), ResultUnreachable},
		{fmt.Errorf("x: %w", errInvalid), ResultInvalid},
		{fmt.Errorf("x: %w", errNotProven), ResultNotProven},
		// A failed proof is named as such even when it also wraps a
		// refusal of another kind.
		{errors.Join(errDenied, errNotProven), ResultNotProven},
		{context.DeadlineExceeded, ResultUnreachable},
		{errors.New("something else"), ResultDenied},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	if got := ClassifyBySentinels(nil, nil, nil, nil, nil)(errDenied); got != ResultDenied {
		t.Errorf("with nil sentinels: %s", got)
	}
}

func TestMetricsRegisterAndNil(t *testing.T) {
	m := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(reg); err == nil {
		t.Errorf("registering twice did not fail")
	}
	m.result(ResultUnreachable)
	want := `
# HELP pullrecords_shim_verifications_total Pull decisions of the shim's gate, by result: accepted (by the origin, now or within the TTL), denied, not_found, unreachable, invalid, not_proven (the registry did not prove it holds the content), mirror_only (not checked), and after the pull unverified_content or private_content (refused, its names removed).
# TYPE pullrecords_shim_verifications_total counter
pullrecords_shim_verifications_total{result="accepted"} 0
pullrecords_shim_verifications_total{result="denied"} 0
pullrecords_shim_verifications_total{result="invalid"} 0
pullrecords_shim_verifications_total{result="mirror_only"} 0
pullrecords_shim_verifications_total{result="not_found"} 0
pullrecords_shim_verifications_total{result="not_proven"} 0
pullrecords_shim_verifications_total{result="private_content"} 0
pullrecords_shim_verifications_total{result="unreachable"} 1
pullrecords_shim_verifications_total{result="unverified_content"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricVerificationsTotal); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}

	var none *Metrics
	none.result(ResultAccepted)
	none.rememberedHit()
	none.originRequest(0)
	if err := none.Register(reg); err != nil {
		t.Errorf("nil Metrics Register = %v", err)
	}
	// A gate without metrics works.
	f := newFixture(t, func(c *Config) { c.Metrics = nil })
	f.verifier.allow(authA, privRepo, digest1)
	if _, err := f.gate.Admit(testContext(t), Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}); err != nil {
		t.Errorf("Admit without metrics: %v", err)
	}
}

// A stamp that cannot be written is logged; the verified pull is still
// admitted, and the next one asks the origin again.
func TestFailedStampStillAdmits(t *testing.T) {
	f := newFixture(t, nil)
	if err := os.RemoveAll(f.stampsDir); err != nil {
		t.Fatal(err)
	}
	f.verifier.allow(authA, privRepo, digest1)
	ctx := testContext(t)
	req := Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}
	for i := range 2 {
		a, err := f.gate.Admit(ctx, req)
		if err != nil || a.Remembered {
			t.Fatalf("Admit %d with an unwritable stamp directory = %+v, %v; want admitted after asking", i, a, err)
		}
	}
	if n := f.verifier.calls.Load(); n != 2 {
		t.Errorf("origin requests = %d, want 2", n)
	}
}

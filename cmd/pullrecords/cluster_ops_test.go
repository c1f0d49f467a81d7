package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pullrecords/pullrecords/cluster/agent"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// --ops-address empty serves nothing; set, it serves the component's
// metrics and its health check.
func TestStartOps(t *testing.T) {
	stop, addr, err := startOps(context.Background(), "", func() error { return nil }, controller.NewMetrics().Register)
	if err != nil || addr != "" {
		t.Fatalf("startOps(\"\") = %q, %v; want nothing served", addr, err)
	}
	stop()

	for _, tc := range []struct {
		name     string
		register func(prometheus.Registerer) error
		metric   string
	}{
		{"controller", controller.NewMetrics().Register, "pullrecords_controller_is_leader"},
		{"agent", agent.NewMetrics().Register, "pullrecords_agent_reports_total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop, addr, err := startOps(context.Background(), "127.0.0.1:0", func() error { return errors.New("not synced") }, tc.register)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			body := func(path string) (int, string) {
				resp, err := http.Get("http://" + addr + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if code, b := body("/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(b, "not synced") {
				t.Errorf("/healthz = %d %q, want 503 with the check's reason", code, b)
			}
			if code, b := body("/metrics"); code != http.StatusOK || !strings.Contains(b, tc.metric) || !strings.Contains(b, "go_goroutines") {
				t.Errorf("/metrics = %d, lacks %s or the Go collector:\n%s", code, tc.metric, b)
			}
		})
	}

	if _, _, err := startOps(context.Background(), "127.0.0.1:notaport", func() error { return nil }, controller.NewMetrics().Register); err == nil ||
		!strings.Contains(err.Error(), "--ops-address") {
		t.Errorf("startOps with a bad address = %v, want an error naming --ops-address", err)
	}
}

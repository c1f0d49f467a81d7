package opsserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pullrecords/pullrecords/cluster/opsserver"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestServesHealthAndMetrics(t *testing.T) {
	reg := opsserver.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "opsserver_test_things_total", Help: "Things."})
	reg.MustRegister(c)
	c.Add(3)
	var sick atomic.Pointer[error]
	check := func() error {
		if e := sick.Load(); e != nil {
			return *e
		}
		return nil
	}
	s, err := opsserver.Start(context.Background(), "127.0.0.1:0", reg, check)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	base := "http://" + s.Addr()

	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz healthy = %d %q, want 200 \"ok\\n\"", code, body)
	}
	why := errors.New("informers not synced")
	sick.Store(&why)
	if code, body := get(t, base+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "informers not synced") {
		t.Errorf("/healthz unhealthy = %d %q, want 503 naming the reason", code, body)
	}
	sick.Store(nil)
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after recovery = %d, want 200 (checked on every request)", code)
	}

	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{"opsserver_test_things_total 3", "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := get(t, base+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ = %d, want 404: only /healthz and /metrics are served", code)
	}
}

func TestStopClosesTheListener(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := opsserver.Start(ctx, "127.0.0.1:0", prometheus.NewRegistry(), func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Stop() // idempotent
	if resp, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("/healthz answered %d after Stop", resp.StatusCode)
	}
}

func TestContextEndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := opsserver.Start(ctx, "127.0.0.1:0", prometheus.NewRegistry(), func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	s.Stop() // returns once serving ended, whoever stopped it
	if resp, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("/healthz answered %d after the context ended", resp.StatusCode)
	}
}

func TestStartErrors(t *testing.T) {
	s, err := opsserver.Start(context.Background(), "127.0.0.1:0", prometheus.NewRegistry(), func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if _, err := opsserver.Start(context.Background(), s.Addr(), prometheus.NewRegistry(), func() error { return nil }); err == nil ||
		!strings.Contains(err.Error(), s.Addr()) {
		t.Errorf("Start on a busy address = %v, want an error naming it", err)
	}
	if _, err := opsserver.Start(context.Background(), "127.0.0.1:0", nil, func() error { return nil }); !errors.Is(err, opsserver.ErrInvalidArgument) {
		t.Errorf("Start without a gatherer = %v, want ErrInvalidArgument", err)
	}
	if _, err := opsserver.Start(context.Background(), "127.0.0.1:0", prometheus.NewRegistry(), nil); !errors.Is(err, opsserver.ErrInvalidArgument) {
		t.Errorf("Start without a check = %v, want ErrInvalidArgument", err)
	}
}

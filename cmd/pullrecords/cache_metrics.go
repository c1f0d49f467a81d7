package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsServer serves /metrics (the collectors of one command, in a
// registry of its own) and /healthz, for "cache run" and "shim".
type metricsServer struct {
	srv     *http.Server
	addr    string
	healthy atomic.Bool
	done    chan struct{}
}

// startMetrics listens on addr (host:port; port 0 picks one) and serves
// until stop.
func startMetrics(addr string, collectors []prometheus.Collector) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the image cache metrics: %w", err)
		}
	}
	return startMetricsRegistry(addr, reg)
}

// startMetricsRegistry serves reg's collectors on addr's /metrics, and
// /healthz, until stop.
func startMetricsRegistry(addr string, reg *prometheus.Registry) (*metricsServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	s := &metricsServer{addr: l.Addr().String(), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !s.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not running")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		// Serve returns ErrServerClosed at stop; any other error means the
		// listener broke, and /healthz stops answering, which is what a
		// prober should see.
		_ = s.srv.Serve(l)
	}()
	return s, nil
}

func (s *metricsServer) stop() {
	if s == nil {
		return
	}
	s.healthy.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}

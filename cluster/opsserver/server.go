package opsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// ShutdownTimeout bounds how long Stop waits for requests in flight.
const ShutdownTimeout = 2 * time.Second

// readHeaderTimeout bounds a client's request headers (slow clients hold
// no connection for long).
const readHeaderTimeout = 5 * time.Second

// Check reports the process's health: nil when healthy, else why not.
// It is called on every /healthz request, from the server's goroutines,
// so it must be safe for concurrent use and quick.
type Check func() error

// Server is a running /healthz and /metrics listener. Create it with Start.
type Server struct {
	addr string
	srv  *http.Server
	done chan struct{}
	once sync.Once
	stop chan struct{}
}

// Start listens on address (host:port; port 0 picks a free one), serves
// /healthz from healthy and /metrics from gatherer, and keeps serving until
// Stop is called or ctx is done. A listening failure is returned at once,
// naming the address.
func Start(ctx context.Context, address string, gatherer prometheus.Gatherer, healthy Check) (*Server, error) {
	if gatherer == nil || healthy == nil {
		return nil, fmt.Errorf("%w: a gatherer and a check are required", ErrInvalidArgument)
	}
	l, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("ops server: listening on %q: %w", address, err)
	}
	logger := klog.FromContext(ctx).WithName("ops")
	s := &Server{addr: l.Addr().String(), done: make(chan struct{}), stop: make(chan struct{})}
	s.srv = &http.Server{Handler: Handler(gatherer, healthy), ReadHeaderTimeout: readHeaderTimeout}
	go func() {
		defer close(s.done)
		// Serve returns ErrServerClosed after Shutdown; anything else is
		// a broken listener, after which the probes fail, as they should.
		if err := s.srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Ops server stopped serving", "address", s.addr)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-s.stop:
		}
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		_ = s.srv.Shutdown(sctx)
	}()
	logger.Info("Serving /healthz and /metrics", "address", s.addr)
	return s, nil
}

// Addr is the address the server listens on, with the port resolved.
func (s *Server) Addr() string { return s.addr }

// Stop closes the listener, lets requests in flight finish (up to
// ShutdownTimeout) and returns once the server has stopped.
func (s *Server) Stop() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// Handler is the server's handler: /healthz from healthy, /metrics from
// gatherer, 404 elsewhere.
func Handler(gatherer prometheus.Gatherer, healthy Check) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := healthy(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// NewRegistry returns a registry holding the Go runtime's and the
// process's collectors (go_*, process_*), for a command to add its own to.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

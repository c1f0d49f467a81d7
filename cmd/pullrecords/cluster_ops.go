package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pullrecords/pullrecords/cluster/opsserver"
)

// opsAddressUsage is the help of --ops-address, shared by controller and
// agent.
const opsAddressUsage = "host:port serving /healthz and /metrics (the manifests use :8080 for the controller, :8081 for the agent); empty serves neither"

// startOps serves /healthz (from healthy) and /metrics (the Go and process
// collectors and what register adds) on address until ctx ends or stop is
// called. An empty address serves nothing: stop does nothing and addr is
// "". The error names the flag.
func startOps(ctx context.Context, address string, healthy opsserver.Check, register func(prometheus.Registerer) error) (stop func(), addr string, err error) {
	if address == "" {
		return func() {}, "", nil
	}
	reg := opsserver.NewRegistry()
	if err := register(reg); err != nil {
		return nil, "", fmt.Errorf("registering the metrics: %w", err)
	}
	srv, err := opsserver.Start(ctx, address, reg, healthy)
	if err != nil {
		return nil, "", fmt.Errorf("--ops-address: %w", err)
	}
	return srv.Stop, srv.Addr(), nil
}

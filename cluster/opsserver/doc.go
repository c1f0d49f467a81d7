// Package opsserver serves a long-running process's operational endpoints
// on one HTTP listener: /healthz, for Kubernetes probes, and /metrics, for
// Prometheus. `pullrecords controller` and `pullrecords agent` use it
// (flag --ops-address).
//
// It is a public package of the cluster module, not cluster/internal:
// cmd/pullrecords is another module, and Go lets only packages under
// cluster/ import cluster/internal.
//
// # Guarantees
//
//   - /healthz answers 200 "ok" exactly when the Check given to Start
//     returns nil at the time of the request, and 503 with the check's
//     error text otherwise; the check runs on every request, so the answer
//     is never older than the request.
//   - /metrics is the Prometheus text (or OpenMetrics, when asked) of the
//     given gatherer only: nothing is registered globally.
//   - Any other path is 404.
//   - Start returns once the listener is bound: Addr is the bound address
//     (a port 0 resolved), and a request sent after Start returns is
//     served. A bad or busy address is Start's error, never a later one.
//   - Stop (or the end of Start's context) closes the listener, waits up to
//     ShutdownTimeout for requests in flight and returns once the serving
//     goroutine has ended. Stop is idempotent.
//
// # Non-guarantees
//
//   - No TLS and no authentication: bind it where only the kubelet's
//     probes and the cluster's Prometheus reach it (the manifests use the
//     pod's network; tests use 127.0.0.1).
package opsserver

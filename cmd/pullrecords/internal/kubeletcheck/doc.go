// Package kubeletcheck tells whether a kubelet is running on this node, so
// that the pullrecords command can refuse to write the pull records beside
// it: a stock kubelet reads them only at start-up, takes no lock, and acts on
// its in-memory copy until it restarts.
//
// Two signals, either of which is enough:
//
//   - a process whose /proc/<pid>/comm is "kubelet" (the /proc root is
//     injectable, for a container that mounts the host's /proc elsewhere and
//     for tests);
//   - the kubelet's healthz endpoint (DefaultHealthzURL) answering HTTP at
//     all, whatever the status: an unhealthy kubelet still runs.
//
// Guarantees:
//   - Detect never writes and never blocks longer than the probe timeout
//     (500 ms unless Checker.Timeout says otherwise).
//   - A process list or endpoint that cannot be read is "not detected",
//     never an error: the check is a safety net, not a proof. Evidence says
//     what was found.
//
// Non-guarantees: a kubelet in another PID namespace (a container without
// hostPID and without the host's /proc) and a kubelet whose healthz endpoint
// is disabled or moved are not detected; nor is a renamed binary.
package kubeletcheck

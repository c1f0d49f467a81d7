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
//     (defaultTimeout unless Checker.Timeout says otherwise).
//   - The process scan cannot be switched off by its configuration: a proc
//     root that is empty, missing, not a directory, cannot be listed, lists
//     no process (numeric) entry at all, or whose process entries all have an
//     unreadable comm is an error (*ProcRootError, ErrUnusableProcRoot),
//     never "not detected". So is a healthz URL that is not an absolute http
//     or https URL (ErrBadHealthzURL). Only an empty HealthzURL skips
//     something: the probe, never the scan.
//   - An endpoint that does not answer, and a process entry that vanishes
//     or whose comm cannot be read while others can, are "not detected":
//     the check is a safety net, not a proof. Evidence says what was found.
//
// Non-guarantees: a kubelet in another PID namespace (a container without
// hostPID and without the host's /proc: its own /proc is usable and lists
// only the container's processes) and a kubelet whose healthz endpoint is
// disabled or moved are not detected; nor is a renamed binary.
package kubeletcheck

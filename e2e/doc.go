//go:build e2e

// Package e2e runs cri and imagecache against a real containerd and two
// real registries (one with htpasswd auth, one open), which each test
// starts for itself through cluster/nodetest: go test -tags e2e ./... in
// this directory, as root.
//
// What it guarantees:
//   - Each test has its own containerd (StartContainerd: own socket, root
//     and state under a temporary directory) and its own two registries on
//     free 127.0.0.1 ports, holding images built and pushed in Go
//     (nodetest.PushImage); nothing is shared between tests or with the
//     machine's own containerd.
//   - Everything a test starts is stopped in t.Cleanup, and dies with the
//     test binary (parent death signal); with PULLRECORDS_TEST_PIDFILE set,
//     the PIDs are also appended to that file.
//   - A test that cannot run here fails with the reason (not root, a
//     program missing); none skips. Every wait is bounded by a deadline.
//
// What it does not guarantee:
//   - It needs root and the Debian packages containerd, runc,
//     containernetworking-plugins and docker-registry (see
//     cluster/nodetest), and builds only with the e2e build tag.
//   - It runs no kubelet and no pods: the "node" of a test is a CRI
//     connection, a kubelet-format record store and a pull manager.
package e2e

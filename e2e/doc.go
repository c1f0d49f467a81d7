//go:build e2e

// Package e2e runs the library against real components, which the tests
// start for themselves through cluster/nodetest: go test -tags e2e ./... in
// this directory, as root.
//
// Two kinds of test live here:
//   - cri, imagecache and originverify against a real containerd and real
//     registries (Debian's docker-registry, one behind htpasswd, one open);
//     the "node" of such a test is a CRI connection, a kubelet-format
//     record store and a pull manager, with no kubelet.
//   - The registry-mirror scene (shim_test.go): one real kube-apiserver and
//     etcd, an htpasswd origin holding a private image, an open registry
//     holding the same image as containerd's mirror of it (hosts.toml), a
//     second open registry with a public image, and stock kubelets v1.37.2
//     with a containerd each. TestMirrorBypassWithoutShim keeps the bypass
//     as a test (a pod without the secret runs the private image through
//     the mirror); the TestShim tests put "pullrecords shim", built from
//     ../cmd/pullrecords, between each kubelet and its containerd and show
//     the bypass gone, a SIGKILL of the shim during a verification, and
//     an origin that is down.
//
// What it guarantees:
//   - Each test of the first kind has its own containerd and registries on
//     free 127.0.0.1 ports, holding images built and pushed in Go
//     (nodetest.PushImage). The mirror scene's API server and registries
//     are shared by the tests of shim_test.go (TestMain starts them once);
//     each test starts its own nodes and shims.
//   - Everything a test starts is stopped in t.Cleanup or at the end of
//     TestMain, and dies with the test binary (parent death signal); with
//     PULLRECORDS_TEST_PIDFILE set, the PIDs are also appended to that file.
//   - A test that cannot run here fails with the reason (not root, a
//     program missing); none skips. Every wait is bounded by a deadline.
//
// What it does not guarantee:
//   - It needs root and the Debian packages containerd, runc,
//     containernetworking-plugins and docker-registry (see
//     cluster/nodetest), the Kubernetes programs (PULLRECORDS_K8S_BIN, or
//     scripts/k8s-binaries.sh builds them), and builds only with the e2e
//     build tag.
//   - Debian's docker-registry 2.8 cannot be a credentialed pull-through
//     cache of an htpasswd registry (it sends no credential to one), so the
//     mirror is an open registry holding a copy; a pull-through cache
//     behaves the same for the runtime.
package e2e

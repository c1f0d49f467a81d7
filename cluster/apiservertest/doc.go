// Package apiservertest starts a real etcd and kube-apiserver (v1.37.2, from
// BinDir) on 127.0.0.1 for Go tests, with static tokens for an admin and for
// kubelet identities, service account tokens from the TokenRequest API and
// server-side apply of YAML manifests.
//
// Typical use, at most one server per test binary, started by the first
// test that needs it (a run of pure tests starts none):
//
//	func TestMain(m *testing.M) {
//		os.Exit(apiservertest.Main(m, apiservertest.Options{NodeNames: []string{"node-a"}}))
//	}
//
//	func TestX(t *testing.T) {
//		s := apiservertest.Need(t)
//		cs := kubernetes.NewForConfigOrDie(s.Admin)
//		...
//	}
//
// BinDir never builds the Kubernetes programs: when they are missing, Need
// fails the test at once with the command that builds them
// (scripts/k8s-binaries.sh, about ten minutes cold).
//
// # Guarantees
//
//   - Both processes listen on 127.0.0.1 only, on ports free when Start
//     picked them; etcd keeps its data (without fsync) in Server.Dir.
//   - Start returns only once etcd's /health and the apiserver's /readyz
//     answer ok and the admin config reaches /version verifying the serving
//     certificate with CAFile. If it fails, nothing it started keeps running,
//     and the error holds the last 30 lines of the failing process's log.
//   - Authentication: static tokens (user admin in group system:masters; user
//     system:node:<name> in group system:nodes for each Options.NodeNames)
//     and service account tokens. Authorization is Node,RBAC; admission has
//     NodeRestriction on and ServiceAccount off. Privileged pods are allowed.
//   - Every rest.Config returned has QPS 1000 and Burst 2000.
//   - Each child runs in its own process group. Stop sends SIGTERM to each
//     child (apiserver first), SIGKILL to its group after 5 s, waits until both children
//     are reaped, then removes Server.Dir. Stop is idempotent.
//   - Each child gets SIGKILL from the kernel if the test process dies
//     without calling Stop (Pdeathsig on a thread kept alive for the child's
//     lifetime), e.g. when a test panics or the test binary times out.
//   - If $PULLRECORDS_TEST_PIDFILE is set, each child's PID (= its process
//     group id) is appended to that file, one per line, so that a calling
//     script can kill leftovers from a trap.
//
// # Non-guarantees
//
//   - No controller-manager, scheduler or kubelet runs: no default service
//     account, no garbage collection, no namespace finalization, no pod ever
//     scheduled or finished; delete pods with grace period 0.
//   - A port may be taken by another process between picking and binding;
//     Start then fails (with the log tail) rather than retrying.
//   - Server.Dir and its logs are removed by Stop (set
//     $PULLRECORDS_APISERVERTEST_KEEP=1 to keep them); a process killed
//     without Stop leaves Dir behind in the temp directory.
//   - A token from ServiceAccountConfig bound to a pod stops working when the
//     pod is deleted (after up to ~10 s: the apiserver caches token
//     authentications); all such tokens expire after one hour.
//   - The first create of a custom resource within ~2 s of its CRD becoming
//     Established is delayed by the apiserver on purpose: apply CRDs once
//     per test binary.
//   - The server is not hardened or tuned for anything but tests.
package apiservertest

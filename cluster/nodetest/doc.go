// Package nodetest runs real Kubernetes nodes for tests on one machine: a
// Debian containerd 1.6 of its own and a real kubelet (v1.37.2, from
// apiservertest.BinDir) per node, registering to a real kube-apiserver
// (package apiservertest), plus local Distribution registries
// (docker-registry) and the image building and pushing that test images
// need, since nothing can be pulled from the internet here. StartContainerd
// runs the containerd part of a node alone, for tests that talk CRI to a
// runtime without a kubelet or an API server (the e2e module's).
//
// What it guarantees:
//   - StartNode returns only once the Node object is Ready, read with the
//     node's own credentials: the kubelet authenticates as system:node:<name>
//     (group system:nodes), so the Node authorizer and NodeRestriction apply
//     to it as in a real cluster.
//   - Nodes are isolated from one another: each has its own directory
//     holding the kubelet's root dir (pull records in RootDir/image_manager),
//     cert dir and pod logs dir, and containerd's root, state, sockets, opt
//     path, runc root, CNI bin/conf dirs and host-local IPAM data; its own
//     kubelet and healthz ports (random free ports) and its own CNI network,
//     bridge and random private /24 subnet. Images pulled on one node are
//     not present on another.
//   - The kubelet's configuration is the one the repository's facts file
//     lists as needed on these machines (cgroup v1 allowed, cgroupfs, no QoS
//     cgroups, no eviction, no image GC, swap allowed, anonymous
//     authentication with AlwaysAllow on the kubelet API), KubeletEnsure-
//     SecretPulledImages is on by default (beta since v1.35).
//   - Errors from StartNode, StartKubelet, StartContainerd,
//     Containerd.StartDaemon and StartRegistry carry the tail of the failing
//     program's log; a failed StartNode or StartContainerd leaves nothing
//     behind (except the logs, when LogDir asks to keep them). Every wait
//     for a program to come up is bounded by the caller's context and a
//     timeout of its own.
//   - Containerd.StopDaemon and StartDaemon stop and restart the containerd
//     process on the same root and state (images pulled before are still
//     there); Node and Containerd share this one containerd implementation.
//   - Node.Stop (idempotent) stops the kubelet, then containerd
//     (Containerd.Stop, also idempotent, does the rest), then kills
//     the shims and pod processes of that containerd, removes their network
//     namespaces, the node's bridge and runc cgroups, unmounts (lazily)
//     everything under the node's directory and removes it.
//   - Every process the package starts dies with the test binary (parent
//     death signal) and, when PULLRECORDS_TEST_PIDFILE is set, its PID is
//     appended to that file.
//   - PushImage is reproducible: the same files and entrypoint give the same
//     manifest digest.
//   - With RegistryHosts (NodeOptions or ContainerdOptions), containerd
//     reads its registry configuration from hosts.toml files only
//     (config_path), one per registry host and per insecure registry, and
//     asks a host's mirrors first; without them the configuration is the
//     registry.mirrors section, as before.
//   - NodeOptions.RuntimeEndpoint puts whatever the caller starts (a CRI
//     proxy) between the kubelet and containerd: the kubelet's runtime and
//     image endpoints are the returned one, Node.CRIEndpoint stays
//     containerd's own.
//   - Registry.Requests lists every request the registry served (method,
//     path, status, user agent), from its access log.
//   - Registry.ChangePassword revokes an htpasswd registry's password: it
//     restarts the registry on the same host, data and log with the new
//     one, and the old one is refused with 401 from its return on.
//
// What it does not guarantee:
//   - It needs root, the Debian packages containerd (1.6, also provides
//     ctr and the runc shim), runc, containernetworking-plugins and
//     docker-registry, and a non-loopback IPv4 address (MachineIP) that all
//     kubelets share. It was checked on cgroup v1 with the cgroupfs driver
//     only (failCgroupV1 is off so that the kubelet accepts it).
//   - Shims are not started by this package, so they are not in the PID
//     file and survive a killed test binary; a later Stop of that node is
//     not possible then. Pods stopped by killing the kubelet are not
//     gracefully terminated.
//   - No scheduler, controller-manager or kube-proxy runs: pods need
//     spec.nodeName, Services do not route, and finished pods are not
//     garbage-collected. Pod networking is a bridge without masquerading:
//     pods reach the host and each other on the node, not the outside.
//   - Some host state is shared between nodes and left as is: the
//     /var/lib/kubelet/device-plugins socket, the kubelets' iptables chains,
//     the k8s.io parent cgroups, containerd's shim socket directory.
//   - Registries serve plain HTTP on 127.0.0.1 (containerd reaches them
//     through the mirrors of NodeOptions or ContainerdOptions
//     InsecureRegistries); htpasswd registries use basic auth without a
//     token server, with the password hashed at bcrypt's minimum cost.
//   - Registry.Requests sees a request only once the registry has logged
//     it, a moment after the client got its answer: poll, or read it after
//     the next step of the test. No pull-through cache: docker-registry
//     2.8.2's sends no credentials to a remote that asks for basic auth
//     (htpasswd), and was seen to answer 500 to a second read of a blob it
//     was still storing. A process started by RuntimeEndpoint
//     is the caller's to stop; Node.Stop does not know it.
//   - A Containerd started alone has no sandbox image unless
//     ContainerdOptions.SandboxImage names one, so it can pull images but
//     not run pods.
package nodetest

// Package e2e holds the cluster image cache's end-to-end test (build tag
// clustere2e; .ci/run runs it as root): a real kube-apiserver and etcd,
// three real nodes (each its own containerd and kubelet v1.37.2), two
// local registries (one behind a password), and the controller and the
// agents running under their own RBAC identities, the agents' tokens bound
// to pods on their nodes.
package e2e

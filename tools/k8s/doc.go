// Package k8s pins the Kubernetes programs the cluster tests run: a real
// kube-apiserver, etcd and kubelet, built from their Go modules at the
// versions k8s.io/kubernetes v1.37.2 uses. It is a module of its own, outside
// go.work, so that the k8s.io/kubernetes dependency graph never reaches the
// library's modules. scripts/k8s-binaries.sh builds the programs once and
// keeps them in a cache directory outside the repository.
package k8s

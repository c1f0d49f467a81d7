// Package cluster is the root of the cluster image cache: kube-fledged's
// ImageCache resources served on a real Kubernetes API server, a controller
// that has the kubelet itself make each pre-pull (a short-lived pod bound to
// the node, carrying the cache's pull secrets) and a node agent that reports
// exact image presence through the CRI. The packages below do the work; this
// one only holds the module's documentation.
package cluster

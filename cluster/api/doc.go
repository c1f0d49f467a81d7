// Package api holds the Go types of the cluster image cache's two
// resources and their constants:
//
//   - ImageCache (kubefledged.io/v1alpha2, namespaced, short name ic):
//     kube-fledged's resource, field for field, so that kube-fledged's
//     manifests and stored objects are adopted in place. The status gains
//     three fields of this project's own (observedGeneration, batch,
//     counts); kube-fledged neither writes nor reads them.
//   - NodeImages (pullrecords.io/v1alpha1, cluster-scoped, one per node,
//     named after the node and owned by it): what the caches want on that
//     node, the node agent's exact presence report, and the controller's
//     per-(cache, image) results. Per-node results live here rather than in
//     the ImageCache, so a cache's status stays small at any node count.
//
// Guarantees: the JSON field names are the CRDs' (deploy/crds); a value
// read from the API server through FromUnstructured and written back
// through ToUnstructured keeps every field it knows. Non-guarantees: the
// types carry no DeepCopy methods (the controller works on copies it
// converts from the informers' unstructured objects) and no validation;
// the CRD schemas and the controller validate.
package api

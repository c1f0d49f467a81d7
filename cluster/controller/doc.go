// Package controller is the cluster image cache's controller: it serves
// kube-fledged's ImageCache resources by having the kubelet itself make
// each pre-pull.
//
// For every (node, image) an ImageCache's current action covers, the
// controller decides one of kube-fledged's results. For a cache without
// pull secrets that is alreadypulled when the node's agent (package agent)
// reports the image present through the CRI, or, on a node without a live
// agent, when the node's status lists it by exact name. Otherwise, and
// always for a cache with pull secrets (an image on the node says nothing
// about the cache's credentials), it creates a short-lived pod bound to the node
// (spec.nodeName) that carries the cache's imagePullSecrets and runs a
// static no-op program copied in from this project's image, so the kubelet
// pulls the image, checks the credential and records it exactly as for any
// pod (KEP-2535): only pods that hold the secret may later use the image.
// The pod's status gives succeeded or failed (ErrImagePull,
// ImagePullBackOff and the registry's message); then the pod is deleted.
// Results go to the node's NodeImages object; each ImageCache's status
// aggregates them into kube-fledged's status, reason, message and
// failures, plus counts.
//
// Guarantees:
//   - Every request of an action gets a result: a pod the node never
//     answers fails at PullDeadline with what it last said; dispatch
//     errors are retried with back-off, never dropped.
//   - No state lives only in memory: the action (its reason, batch and
//     generation) is in the ImageCache's status, pods have deterministic
//     names, and a pod is deleted only after its result is written, so a
//     restarted or newly elected controller carries on where the last one
//     stopped.
//   - Pre-pull pods are bounded per node and cluster-wide.
//   - Results are keyed by namespace/name and UID: two caches with one
//     name in different namespaces, or a cache deleted and created again,
//     never share results.
//   - A node joining or changing labels is worked on at once.
//   - Only its own pods count: a pod is the controller's if it carries the
//     managed-by label and an ImageCache the controller knows (by UID)
//     controls it. Other labelled pods are never counted against the
//     limits, read for results or deleted; the shipped admission policy
//     refuses the label to everyone but the controller (and
//     system:masters).
//   - Only kube-fledged's own controller (its namespace and service
//     account, Config.KubeFledgedNamespace and KubeFledgedServiceAccount)
//     stops Run; under leader election Run's failure is logged, the Lease
//     released and the error returned.
//   - The controller reads no Secret: it copies the cache's secret names
//     into pods, and the kubelet reads them under the Node authorizer.
//
// Non-guarantees: "alreadypulled" says the image is on the node, not that
// any pod may use it (the kubelet decides that per pod); images a cache
// stops wanting are removed only where an agent runs; kube-fledged's
// node-status fallback sees only the images the kubelet lists there (50 by
// default).
package controller

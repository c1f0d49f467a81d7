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
// about the cache's credentials), it pulls it with a short-lived pod bound
// to the node (spec.nodeName) that carries the cache's imagePullSecrets and
// up to Config.MaxImagesPerPod of the node's images (one container each,
// in spec order), every container running a static no-op program copied
// in from this project's image, so the kubelet pulls each image, checks
// the credential and records it exactly as for any pod (KEP-2535): only
// pods that hold the secret may later use the image. Each image's
// container status gives its succeeded or failed (ErrImagePull,
// ImagePullBackOff and the registry's message); once every image of the
// pod has its result, the pod is deleted.
// Results go to the node's NodeImages object, a pod's all in one write
// once every image of it has one (the pod keeps them meanwhile), and a
// pod is deleted once; each ImageCache's status
// aggregates them into kube-fledged's status, reason, message and
// failures, plus counts.
//
// Guarantees:
//   - Every request of an action gets a result: a pod the node never
//     answers fails at PullDeadline with what it last said; dispatch
//     errors are retried with back-off, never dropped. A pod the API
//     server refuses for good (403, 400 or 422: Pod Security, a
//     ResourceQuota, an admission policy or webhook, authorization) fails
//     its request with a reason naming the rule (PodSecurityRefused,
//     QuotaRefused, AdmissionPolicyDenied, AdmissionWebhookDenied,
//     PodRefused) and the API server's message, with one Warning event
//     per action and reason on the cache (refused.go); conflicts,
//     throttling, timeouts, server errors, and a quota exceeded while the
//     controller's own pre-pull pods there still run, are retried.
//   - Pre-pull pods meet Pod Security "restricted" and carry pod-level
//     CPU and memory requests and limits (KEP-2837, gate PodLevelResources,
//     on by default since v1.34): a ResourceQuota is charged 64m/64Mi of
//     requests and 100m/128Mi of limits per pod whatever its number of
//     images, and each container's own small requests and limits leave a
//     LimitRange nothing to default (pods.go). An API server with the gate
//     off drops them, and the admission policy then refuses the pods
//     (AdmissionPolicyDenied). The shipped admission policy admits from the
//     controller's service account only that exact pod shape, and only
//     deletes of its own pods.
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
//     account, Config.KubeFledgedNamespace and KubeFledgedServiceAccounts)
//     stops Run; under leader election Run's failure is logged, the Lease
//     released and the error returned.
//   - The controller reads no Secret: it copies the cache's secret names
//     into pods, and the kubelet reads them under the Node authorizer.
//   - Healthy (for /healthz) is nil only while the loops are alive: under
//     Run once the informers have synced; under RunWithLeaderElection
//     while leading and synced, or as a standby that has seen who leads.
//     Config.Metrics (optional) counts syncs, sync errors, pre-pull pods
//     created and results by status, and shows is_leader; metrics and
//     health never change a decision.
//
// Placement (Config.Placement, flags of `pullrecords controller`): a
// pre-pull pod is bound by spec.nodeName, so no scheduler filters it and
// the kubelet admits it on any node; the controller itself decides where
// pods may go, and a tenant's node selector can only narrow that. By
// default a node gets no pod when it is a control-plane node (label
// node-role.kubernetes.io/control-plane or the legacy .../master), is
// cordoned (spec.unschedulable), its Ready condition is not True (a node
// whose kubelet is gone is Unknown), or it has a NoSchedule or NoExecute
// taint that the admin's tolerations do not tolerate (PreferNoSchedule is
// ignored; the not-ready, unreachable and unschedulable taints are left to
// the Ready and cordon rules they mirror). Pre-pull pods carry exactly the
// admin's tolerations, none by default. Each widening grants every
// tenant's caches the nodes it opens, for images pulled with the tenant's
// secrets:
//   - Tolerations (--prepull-toleration key=value:Effect, key:Effect or
//     Exists): the nodes with those taints, a dedicated pool's for one;
//     Exists opens every tainted node, as every pod tolerated before.
//   - IncludeControlPlane (--include-control-plane-nodes): control-plane
//     nodes, next to the API server and etcd.
//   - IncludeCordoned (--include-cordoned-nodes): nodes being drained.
//   - IncludeNotReady (no flag; discouraged): nodes not Ready, where a dead
//     kubelet never answers, so each pod holds the action for the whole
//     PullDeadline.
//
// A (node, image) whose node is not eligible gets no pod and no presence
// answer, is counted as skipped (neither pulled nor failed), and the
// cache's message names the node and why ("2 node(s) skipped by the
// controller's placement rules: n1 not Ready, n2 cordoned."), so the
// action ends without waiting for any deadline; with every pair skipped
// the status is NoImagesPulledOrDeleted. The decision is made again at
// every sync, and a node's cordon, taint or Ready change requeues the
// caches, so a node that becomes eligible is worked on at once. A pod
// created while its node was eligible keeps its result (or its deadline)
// when the node stops being eligible. Purges are not placement's: they
// are the node agent's, with no pod.
//
// While an action is Processing, its message names the nodes whose agent
// reported once and then stopped for longer than AgentTimeout, with the
// last heartbeat ("n1 since 2026-12-02T05:50:00Z"); the controller then
// trusts only the node's status there.
//
// Purges (a cache deleted, purged, or updated to drop an image) remove
// only images the cache itself pulled:
//   - When the controller creates a pre-pull pod for an image the node's
//     agent reported absent, it records a pull (PullRecord: cache, UID,
//     batch) on the image's entry in the node's NodeImages spec; when that
//     pod's pull succeeds, the record gains the image the kubelet reported
//     (containerStatuses imageID). An image found present (alreadypulled,
//     or present before a pod of a cache with pull secrets, or on a node
//     without a live agent) gets no record, so no purge of that cache
//     touches it. Records live in the spec (cluster-scoped, written by the
//     controller only), not in pods a tenant may edit.
//   - An image no cache wants any more goes to spec.purge with its records
//     (by image ID); one without a record is simply dropped. The agent
//     removes it only after its own checks on the node (package agent:
//     kept by another cache by ID, pinned, used by a container, other
//     tags).
//   - A purge entry stays in the spec whether or not the agent is alive,
//     until the agent reports it gone or kept for a final reason (in use
//     by a container is not: the agent removes the image once no container
//     uses it, as a cache's own deleted pre-pull pods keep their containers
//     a while) for the spec that holds it, and every purge action waiting
//     on it has its result written. A purge
//     action's result is succeeded only on that report ("removed from the
//     runtime", or ImageKept with the agent's reason, "kept: ..."), failed
//     on the runtime's refusal (ImageDeleteFailed); while the node's agent
//     is away the request stays Processing and the status message says
//     so. An image this cache did not pull answers at once, succeeded,
//     with reason NotPulledByCache ("not removed: the cache found it
//     present, did not pull it"), ImageKept ("kept: another ImageCache
//     keeps it") or NotCached.
//
// Size bounds (limits.go) keep what one tenant writes from out-sizing or
// blocking another tenant's caches; tenants are namespaces:
//   - An ImageCache listing more than Config.MaxImagesPerCache distinct
//     images (default 1000; --max-images-per-cache) is refused at once:
//     status Failed, reason CacheTooLarge, a message naming the limit; no
//     request is built and nothing of it is written to any node. It is
//     looked at again when its spec changes or a refresh is asked, not
//     periodically.
//   - A node's NodeImages holds at most Config.MaxCacheImagesPerNode
//     (cache, image) entries (default 360; --max-cache-images-per-node),
//     which keeps the object under 800 KiB, well under the API server's
//     1.5 MiB etcd limit: an entry is one pair with an image name of at
//     most 64 bytes and a cache namespace/name of at most 48, a longer pair
//     counts as more in proportion to its bytes (measured at about 1.4 KB a
//     pair at common lengths). When the caches wanting images on a node
//     want more, whole caches are admitted by max-min fair shares across
//     namespaces: a namespace wanting at most the bound divided by the
//     namespaces with caches there is always admitted whole, the biggest
//     demands are cut, and within a namespace older caches (creation time,
//     then name) go first. A purging cache counts too (its results take the
//     room).
//   - A cache a node refuses has none of its images or results there (its
//     pulls there go to the purge list as for any cache the node no longer
//     holds); its action gets final results for that node, failed (a purge:
//     succeeded) with reason NodeImageLimit, kept in its own status only,
//     whose message names the limit, how many nodes refuse it and the fix.
//     No refused pair is ever answered as pulled or present. Other caches
//     on the node are untouched.
//   - Result messages written to nodes are cut at 512 bytes; a cache's
//     status lists at most 200 failures in all (and FailuresPerImage per
//     image), counting the rest in counts.failuresOmitted.
//
// A cache's sync works one node at a time and keeps, across nodes, only
// the tally of results (counts, the failures its status lists, a purge's
// reasons), each node's agent liveness, why placement skips a node, and the
// pods it plans for the round (at most MaxInFlight): its memory grows with
// the nodes and the cache's failed images, not with nodes x images.
//
// Non-guarantees of the bounds: a cache refused on a node is looked at
// again at its next action (refresh, update), not when room frees up; a
// cache that finished before another tenant's cache cut it keeps its last
// status until then. Purge entries are not counted against the bound (they
// come from earlier admitted pulls and go once the agent has done them).
//
// Layout, by concept; calls go down this list, never up:
//   - controller.go: informers, queues, workers; sync_cache.go: one round
//     of a cache (syncCache); sync_node.go: one node's object (syncNode).
//   - action.go: the action's lifecycle (which action is due, its start
//     and its end); status.go: writing the cache's status.
//   - decide.go: one (node, image)'s decision; purge.go: a purge's;
//     placement.go, limits.go, limits_sync.go: which nodes and caches
//     take part.
//   - podplan.go, budget.go, pods.go, podwrite.go: grouping images into
//     pre-pull pods within the in-flight bounds, the pod's shape and how
//     its status reads, the pod API writes; refused.go: a refused create.
//   - results.go, tally.go: a result (api.Outcome, kept as an
//     api.NodeResult) from the moment it is read off a pod to the node's
//     object and the cache's status; agentview.go: what the node's agent
//     says; cacheview.go: the caches, typed; plan.go: what a cache asks
//     of a node.
//
// Non-guarantees: "alreadypulled" says the image is on the node, not that
// any pod may use it (the kubelet decides that per pod); kube-fledged's
// node-status fallback sees only the images the kubelet lists there (50 by
// default). A record is made only when the controller knew the image was
// absent, so some pulls leave images on the node after every cache that
// wanted them is gone (safe, not tidy): a pull made while the agent was
// not reporting, a pull recorded only in memory by a controller that
// restarted before writing it, an image kept once (the entry and its
// records go with the answer), and purge entries written by an earlier
// version (no records). A record stays with the image's entry while any
// cache wants it, so the image goes once the last cache drops it, even if
// that cache only found it present. Two caches pulling one absent image at
// once both record it.
package controller

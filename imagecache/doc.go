// Package imagecache is the node-local image cache manager: it keeps
// declared, namespaced sets of images (ImageCache) present on the node,
// pulling, refreshing and purging them through the CRI image service. In
// process with the pull records it records every pull in the pull manager
// (KEP-2535), so an image pre-pulled with a tenant's secret is usable only by
// pods holding that secret, and an anonymously pulled one by every pod.
//
// # Two modes
//
// Pull records have one writer per kubelet directory: the process that
// holds the store's lock (fsstore.New, writable). A stock kubelet takes no
// lock and never sees records another process writes while it runs (its
// in-memory cache turns authoritative at start-up and answers misses "not
// found"), so an image another process pulls through the CRI with a
// tenant's secret looks preloaded to it, and under the default policy
// NeverVerifyPreloadedImages every pod may use it. Hence (Manager.Mode):
//
//   - In-process (New, ModeInProcess): the manager is given a pull manager
//     over the store this process holds the lock of, typically inside a
//     kubelet built on this library. Every pull is recorded (intent, pull,
//     record with the cache's secret, or NodePodsAccessible when
//     anonymous), caches may have pull secrets, and purges prune records.
//   - Standalone (NewStandalone, ModeStandalone): no pull manager, for a
//     process beside a kubelet it does not control (the pullrecords
//     command's "cache run"). It writes no intent and no record, pulls
//     anonymously only (that leaks nothing: every pod could pull the image
//     itself), and refuses a cache with a pull secret with a
//     *PrivateImageError (ErrPrivateImage). To pre-pull a private image
//     beside a stock kubelet, let the kubelet pull it: a pod bound to the
//     node carrying the imagePullSecrets.
//
// It keeps the vocabulary of kube-fledged's ImageManager (work types create,
// update, delete, refresh, purge, and its statusupdate as the CacheStatus
// each batch ends with; statuses succeeded, failed, jobcreated,
// alreadypulled, unknown) but runs on the node itself: no Jobs, no pods, no
// crictl.
//
// # The image service
//
// The manager talks to the runtime through ImageService, whose methods use
// only imageruntime's types (imageruntime.Image, imageruntime.AuthConfig), so
// this package does not depend on the CRI or gRPC: *cri.ImageService
// satisfies it, and a runtime shim can pass its own client instead.
//
// The manager classifies the service's errors without knowing their types,
// by optional methods of the errors in the chain, each found with errors.As
// (the first error in the chain that has the method decides):
//
//   - Unauthorized() bool: the registry refused the credentials. Reported
//     with ReasonUnauthorized and never retried (IsUnauthorized).
//   - Timeout() bool: the call ran out of time. Reported with ReasonTimeout
//     (IsTimeout). context.DeadlineExceeded, os.ErrDeadlineExceeded and
//     net.Error timeouts already have it.
//   - Transient() bool: trying again may succeed. Retried (IsTransient). An
//     error without the method is retried only if it is a timeout.
//
// *cri.CallError has all three, so errors.Is against cri's sentinels
// (cri.ErrUnauthorized, cri.ErrTimeout) and this package's classification
// agree. Any other error is a permanent failure with the reason of the call
// that failed.
//
// # Pull secrets
//
// A cache's PullSecret names the Kubernetes secret a pull is recorded for
// (namespace, name, UID) and gives its credential one of two ways. Inline
// (Username, Password, Email): one credential for every image, persisted
// with the cache in the state directory, password included. Or by path
// (DockerConfigPath): a docker config file ({"auths": ...} or the legacy
// .dockercfg map) or the directory where a kubernetes.io/dockerconfigjson
// or kubernetes.io/dockercfg secret is mounted. A path is read again at
// every pull, so a rotated secret takes effect at the next pull or
// refresh, and only the path is persisted. For each image the entries are
// matched as the kubelet's credentialprovider keyring matches a pod's
// secret (host with port, path prefix, "*.example.com" globs, docker hub's
// index.docker.io entry, most specific first); the "already pulled" check
// presents every matching entry, as the kubelet does for a pod; the pull
// tries them in turn, as the kubelet's runtime manager does, and records
// the one that worked with the kubelet's credential hash. An image no
// entry matches fails with ReasonNoCredentials (a cache with a secret never
// pulls anonymously), and an unreadable or malformed config with
// ReasonDockerConfigError, naming the file. Setting both ways is an
// ErrInvalidPullSecret error from Apply and Sync.
//
// # Cache files
//
// ParseCacheFile is the one parser of the cache file format (YAML or JSON:
// a list of caches, or one, with namespace, name, images, refreshInterval,
// forceFullCache and an inline pullSecret), shared by the pullrecords
// command's "cache apply" and declared-caches file and by a kubelet fork's
// in-process cache (kubeletadapter). ReadCacheFile reads one from a path,
// bounded by MaxCacheFileSize, without following a symbolic link. Both
// guarantee:
//
//   - all or nothing: every problem is found first, and a file with any
//     problem yields no cache and a *CacheFileError (ErrInvalidCacheFile)
//     listing the problems (at most 20), each naming the cache and the
//     field;
//   - strictness: unknown keys, a value of the wrong type, a namespace or
//     name Kubernetes would refuse, an image reference the kubelet would
//     refuse, an image or a cache (namespace/name) listed twice, an empty
//     image list, and a pull secret without namespace, name or uid are
//     problems;
//   - no credential in an error: a pull secret's values are never quoted.
//
// A cache file with a pull secret holds its password: it should be mode
// 0600 and owned by the process that reads it.
//
// # Guarantees
//
//   - Every request gets exactly one ImageWorkResult, delivered to the
//     result handler: pulls and removals that ran, requests superseded by a
//     later change (unknown/Superseded), and requests that never ran or were
//     cut off because Run's context ended (unknown/ShutDown). Each batch
//     (one Apply, Delete, Refresh, or resumed piece of work) then gets one
//     CacheStatus (the statusupdate) with counts per status, after all its
//     results.
//   - Apply computes the difference with the applied version: added images
//     are pulled (all of them when the credentials or ForceFullCache
//     changed), dropped ones purged. Delete purges every image of the cache.
//     A purge never removes an image another applied cache lists.
//   - Sync makes a list the whole set of applied caches (for a declarative
//     source such as a file another process edits): it checks every cache
//     first and changes nothing if one is invalid, listed twice or (in
//     standalone mode) private, then applies only what is new or changed
//     and deletes what is no longer listed.
//   - "Already pulled" is decided by the runtime's ImageStatus for the exact
//     reference plus (in-process) the pull manager's MustAttemptImagePull
//     for the cache's credentials, never by text search. ForceFullCache
//     always pulls.
//   - In-process, every pull is RecordPullIntent, then PullImage, then
//     RecordImagePulled (with the cache's secret: UID, namespace, name and
//     the kubelet's credential hash; or NodePodsAccessible for an anonymous
//     pull) or RecordImagePullFailed, also when the pull is cut off by
//     shutdown, so no intent is left behind.
//   - Standalone, no pull is made with credentials and nothing is recorded:
//     Apply of a cache with a pull secret returns a *PrivateImageError and
//     changes nothing; such a cache loaded from the state directory stays
//     applied, and each of its pulls fails with ReasonPrivateImage without
//     calling the runtime. "Already pulled" is the runtime having the image.
//   - A purge removes the image through the CRI, unless an applied cache
//     lists another name that resolves to the same image ID (removing one
//     name removes the content). Once the runtime no longer has the image,
//     a pull manager that can prune records (PruneImagePulledRecord, as
//     *pullmanager.PullManager does) deletes its pulled record under
//     the record's lock, after asking the runtime once more under that lock:
//     a record written by a pull of the same content under another name that
//     finished meanwhile is kept. A standalone manager prunes no record.
//   - A pull is recorded under the image ID ImageStatus reports, the key
//     checks use, not under the reference the pull returned (runtimes such
//     as CRI-O return a repo digest there; kubernetes#137024).
//   - At most WithWorkers requests run at once, and at most one per image:
//     requests for an image that is queued or in flight join it, and one CRI
//     call per distinct credential serves them all.
//   - Each attempt has a deadline (WithRequestTimeout). Transient failures
//     (IsTransient) are retried with per-image exponential backoff up to
//     WithRetries attempts; permanent ones (401/403, not found) are not.
//   - With WithStateDir the applied caches and unfinished removals are
//     persisted (JSON, temp file + fsync + rename + directory fsync) before
//     Apply and Delete return, and a new manager on the same directory
//     resumes whatever did not finish. A corrupt state file is an error
//     (ErrState), never an empty state. LoadState reads the applied caches
//     without a manager and without writing anything (no directory is
//     created, no temporary file removed).
//   - With WithStateDir the last completed status of each cache (what the
//     status handler received when its latest batch completed) is kept in
//     a file of its own in the directory, last-status.json (0600, written
//     as the state file is), so the state file's format is unchanged and a
//     field a later version adds to either file breaks no reader.
//     Manager.LastStatus returns it, across restarts; ReadLastStatus reads
//     it without a manager or a runtime, writing nothing, while a manager
//     runs or not. It holds no credential. A corrupt last-status file is an
//     ErrState error from ReadLastStatus; a manager logs it, starts with no
//     last statuses and replaces the file at the next completion.
//   - No credential or credential hash is logged or put in a result.
//   - Metrics (Collectors): queue depth, results by work type and status,
//     CRI pulls by result and their duration. Nothing is registered
//     globally.
//
// # Non-guarantees
//
//   - The state file holds the inline registry credentials of the caches'
//     pull secrets, passwords included (mode 0600 in a 0700 directory),
//     as a node's docker config would. A secret given by DockerConfigPath
//     is kept as the path alone.
//   - Results are delivered in completion order; with one worker that is the
//     order of the requests.
//   - The "kept by another cache" check and the removal are not atomic with
//     a concurrent Apply that adds the same image; that Apply's own pull
//     brings the image back.
//   - Retry backoff and request deadlines use real time; the injected clock
//     drives timestamps, durations and periodic refresh.
//   - Run can be called once per Manager.
//   - New cannot check that its pull manager sits on a store this process
//     holds the lock of; wiring it over anything else (a read-only store,
//     another process's directory) brings back the leak described above.
package imagecache

// Package kubeletadapter lets a kubelet fork run this library's image pull
// manager (KEP-2535, "ensure secret pulled images") in place of the
// kubelet's own, with a patch of a few lines to
// pkg/kubelet/kuberuntime/kuberuntime_manager.go (see README.md).
//
// It lives in its own Go module because it requires k8s.io/kubernetes; the
// library modules do not.
//
// What it provides:
//   - ImagePullManager: the kubelet's pullmanager.ImagePullManager interface
//     over a *pullmanager.PullManager, converting the kubelet's internal
//     credential types (pkg/kubelet/apis/config) to the library's and back;
//   - NewForKubelet: the constructor taking what kuberuntime_manager.go has
//     at hand; it opens fsstore over <root>/image_manager, memstore.NewCache
//     in front of it, and pullmanager.NewImagePullManager;
//   - ToKubelet / FromKubelet: any accessor.PullRecordsAccessor as the
//     kubelet's PullRecordsAccessor, and the reverse;
//   - SwapKubeletMetrics: the manager's metrics under the kubelet's names in
//     the kubelet's registry;
//   - ReadNodeConfig, NodeConfig, WithNodeConfigPath: the per-node switches
//     for the library's deliberate differences from the kubelet, read by
//     NewForKubelet from <rootDirectory>/pullrecords/config.yaml;
//   - the in-process image cache (below), started by NewForKubelet when the
//     node configuration names a cache file (imageCacheFile), with
//     ImageCacheStateDir and ImageCacheFilePollInterval;
//   - CredentialsFromKubelet, RecordToKubelet and friends: the conversions.
//
// # Per-node switches
//
// A fork built once can run differently per node: NewForKubelet reads a
// small, versioned file the node owns (apiVersion pullrecords.io/v1alpha1,
// kind NodeConfiguration) at NodeConfigPath(rootDirectory), that is
// <root>/pullrecords/config.yaml, and turns on what it asks for:
// preloadedImageProtection (pullmanager.WithPreloadedImageProtection, the
// fix for kubernetes#138175), normalizedImageNames
// (pullmanager.WithNormalizedImageNames) and credentialExpiry
// (pullmanager.WithCredentialExpiry, with the proofs in
// CredentialProofsDir(rootDirectory), outside image_manager). The file lives under the kubelet's
// root directory because that directory is what the switches are about: it
// holds the records they change the meaning of, it is already per node and
// kept across restarts and upgrades, and NewForKubelet already receives it,
// so the fork's patch needs no new flag, no new KubeletConfiguration field
// (an API type change in every fork) and no extra line. A stock kubelet
// never reads the file, so a node can switch back to one without removing
// it. A distribution that keeps node files elsewhere passes
// WithNodeConfigPath.
//
// # In-process image cache
//
// With imageCacheFile: <absolute path> in the node configuration,
// NewForKubelet also runs an imagecache manager in the kubelet process
// (imagecache.New, in-process mode): over the kubelet's own image service
// (the runtime manager it was given: the same CRI client, endpoint and
// timeouts the kubelet pulls with) and over the library pull manager it
// has just built, so every pre-pull is recorded where the kubelet's own
// checks look, under the store lock this process holds. The fork's patch
// needs no extra line. The cache file has the format of "pullrecords cache
// apply" (imagecache.ParseCacheFile: a YAML or JSON list of caches, each
// with namespace, name, images, optional refreshInterval, forceFullCache,
// and an inline pullSecret naming the Kubernetes secret, namespace, name
// and uid, plus username and password). The manager's state is kept in
// ImageCacheStateDir(root), <root>/pullrecords/imagecache.
//
// Guarantees of the in-process cache (checked by this module's tests over
// the kubelet's real image manager):
//   - an image cached with a pull secret is pulled with that credential and
//     recorded for that secret (its namespace, name, UID and the kubelet's
//     credential hash), so the kubelet lets a pod use it without a pull
//     only if the pod holds that secret, by the kubelet's own rules: the
//     same coordinates, or the same credential content; any other pod must
//     pull (IfNotPresent: the registry decides) or fails with
//     ErrImageNeverPull (Never);
//   - an image cached without a pull secret is recorded as pulled
//     anonymously (NodePodsAccessible): every pod on the node may use it,
//     as after an anonymous pull by the kubelet;
//   - the cache file is read before anything is opened: missing, unreadable,
//     invalid (any problem ParseCacheFile finds), over
//     imagecache.MaxCacheFileSize, a symbolic link or not a regular file,
//     it makes NewForKubelet fail with an error naming it (ErrImageCache),
//     and the kubelet does not start;
//   - the file is read again every ImageCacheFilePollInterval: caches
//     added, changed or removed there are applied, pulled and purged (a
//     purge never removes an image another cache lists); a version that
//     cannot be used (invalid, missing, unreadable) is logged once, with
//     every problem, and changes nothing: the caches applied stay until a
//     usable version comes;
//   - each batch of work ends with one "Image cache status" line in the
//     kubelet's log (cache, work type, counts per outcome), and each failed
//     request with its reason; no credential or credential hash is logged;
//   - (*ImagePullManager).Close stops the cache and waits for it before
//     releasing the records: work cut off ends unknown/ShutDown with its
//     intent cleared, and is resumed at the next start.
//
// Not guaranteed by the in-process cache:
//   - the file's secrecy: it holds registry passwords in clear, and so does
//     the state directory (mode 0600 in a 0700 directory). Keep the cache
//     file mode 0600, owned by root (the node's), in a directory only root
//     can write. Whoever can write it decides which images the node pulls
//     and for which secret they are recorded: a pullSecret naming a tenant's
//     secret (namespace, name, uid) vouches that the credential in the file
//     is that tenant's, and the tenant's pods then use the image without a
//     pull. The file is trusted as the kubelet's configuration is;
//   - the secret's lifecycle: the credential is the file's, not the API
//     server's; a deleted or rotated Kubernetes secret changes nothing here
//     until the file does (the kubelet's rules then still accept a pod that
//     holds a secret with the recorded coordinates);
//   - zero caches: the format needs at least one cache, so removing the
//     last one means removing imageCacheFile from the node configuration
//     (and restarting), which leaves the applied caches' images and records
//     in place; a file removed while the kubelet runs is "cannot be used";
//   - presence between refreshes: the kubelet's image garbage collection
//     may remove a cached image that no pod uses; a cache with a
//     refreshInterval pulls it again at its next refresh;
//   - a change is seen within a poll interval, not at once;
//   - pulls start as soon as NewForKubelet returns, over the runtime the
//     kubelet was given: a runtime not answering yet fails them as
//     transient, retried as imagecache retries (WithRetries' defaults); a
//     pull still failing then waits for the cache's next refresh or a file
//     change.
//
// Guarantees (each checked by this module's tests, which drive the
// kubelet's real images.NewImageManager(...).EnsureImageExists with the
// KubeletEnsureSecretPulledImages gate on, in three wirings: the kubelet's
// own manager and store, the library through this adapter, and the
// kubelet's manager over the library's store):
//   - the same outcome for every EnsureImageExists (image ref, message,
//     error), the same runtime pulls and the same events as the kubelet's
//     own manager, for pulls with secrets, pods without credentials, the
//     same secret content in another namespace, rotated secrets, short and
//     digest image names under IfNotPresent and Never, preloaded images under
//     the four policies, and image GC pruning;
//   - byte-identical files in image_manager/pulling and image_manager/pulled
//     (apart from lastUpdatedTime, which the kubelet takes from the wall
//     clock), with the kubelet's names and modes, so a node can switch
//     between a stock kubelet and a fork in either direction across a
//     restart;
//   - the conversions lose nothing: every field, nil versus empty slices and
//     maps included, survives a round trip;
//   - the kubelet's five pull-manager metric names, types, label names and
//     HELP texts, exposed from the kubelet's registry;
//   - per-node switches: with no node configuration file, or one that turns
//     every switch off, NewForKubelet behaves exactly as it did before the
//     file existed, which is the kubelet's behaviour above; every switch is
//     off unless the file says true;
//   - a node configuration file that is there but unusable (unreadable,
//     malformed YAML, unknown or differently cased keys, duplicate keys,
//     more than one document, wrong apiVersion or kind, a null or
//     non-boolean switch, empty, over MaxNodeConfigSize, a symbolic link,
//     directory or other non-regular file) makes NewForKubelet fail with
//     "pullrecords node configuration <path>: <problem>" (ErrInvalidNodeConfig)
//     before the records directory is opened or created: never a silent
//     default. An empty file is refused rather than read as "all off"
//     because a truncated or interrupted write leaves one;
//   - the start-up line ("Image pull manager: pullrecords library") names
//     the switches in force (deliberateDifferences) and the file they came
//     from, or that there was none (nodeConfig);
//   - preloadedImageProtection keeps the record files in the kubelet's
//     format (in the kubernetes#138175 scene byte-identical to a stock
//     kubelet's): a stock kubelet reading the directory afterwards parses
//     every file and decides as it always does;
//   - credentialExpiry changes no record file (the proofs are beside
//     image_manager, never in it) and deletes no record: an expired
//     credential makes its pod pull again; the image never looks preloaded.
//     Proofs survive restarts and crashes (fsync'd files); a missing one is
//     an expired one, so a switch-over through a stock kubelet costs pulls,
//     never access.
//
// Not guaranteed:
//   - behaviour where the library deliberately differs from the kubelet,
//     once a switch turns it on: that is the point of the switch (see
//     pullmanager's "Deliberate differences");
//   - compatibility of normalizedImageNames with a stock kubelet: records
//     written with it carry normalised mapping keys the kubelet does not look
//     up for short names, so after a switch-over in either direction pods
//     using short names re-pull (IfNotPresent) or fail with
//     ErrImageNeverPull (Never) until their records are rewritten; the files
//     still parse;
//   - a change of the file while the kubelet runs: it is read once, at
//     start-up; a change takes effect at the next kubelet restart (the
//     cache file it names is re-read, see above; the imageCacheFile path
//     itself is not);
//   - the file's own safety: it is trusted as the kubelet's configuration
//     is; whoever can write under the kubelet's root directory can already
//     rewrite the records themselves;
//   - log messages: the library logs its own (capitalised, structured)
//     messages, not the kubelet's;
//   - metric behaviour beyond names and descriptors: the on-disk gauges are
//     also set at start-up, the in-memory usage gauges are relative to
//     nominal sizes (the library cache is unbounded), and the swapped
//     collectors bypass component-base (see SwapKubeletMetrics);
//   - more than one writer per directory: like the kubelet, the library
//     expects to be the only process writing <root>/image_manager; fsstore
//     may refuse to open a directory another writer holds, and NewForKubelet
//     returns that error;
//   - any k8s.io/kubernetes version other than v1.37.2: the kubelet's
//     internal interfaces are not a stable API, so a kubelet update may need
//     a new release of this module.
package kubeletadapter

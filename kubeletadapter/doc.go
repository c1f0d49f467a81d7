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
//     start-up; a change takes effect at the next kubelet restart;
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

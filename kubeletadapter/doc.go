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
//   - CredentialsFromKubelet, RecordToKubelet and friends: the conversions.
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
//     HELP texts, exposed from the kubelet's registry.
//
// Not guaranteed:
//   - behaviour where the library deliberately differs from the kubelet
//     when an option asks for it (pullmanager.WithPreloadedImageProtection,
//     normalised names): NewForKubelet turns none of them on;
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

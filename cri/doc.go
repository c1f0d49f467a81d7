// Package cri adapts a CRI v1 image service (k8s.io/cri-api runtime.v1,
// gRPC over a unix socket) to the small image interfaces of this module, in
// imageruntime's types: ListImages satisfies imageruntime.ImageLister (what
// pullmanager.NewImagePullManager takes), and
// *ImageService satisfies imagecache.ImageService (ImageStatus, PullImage,
// RemoveImage). cri imports imageruntime only, never pullmanager or
// imagecache, so imagecache stays free of gRPC.
//
// # Guarantees
//
//   - Dial accepts "unix:///path" and "/path". It fails with
//     ErrEndpointNotFound (naming the path) when there is no socket or
//     nothing listens on it (connection refused), with ErrInvalidEndpoint for
//     other schemes or a file that is not a socket, and with ErrNotCRI when
//     something listens but is not a CRI image service: it does not answer
//     gRPC (another kind of server), or it answers gRPC without runtime.v1
//     ImageService. It checks with one ImageFsInfo call, so a successful Dial
//     means the image service answered.
//   - Every call has its own timeout (2 minutes for PullImage, WithCallTimeout
//     for the rest), on top of the caller's context.
//   - Call errors are *CallError values carrying the gRPC code. errors.Is maps
//     them to ErrUnauthorized (Unauthenticated, PermissionDenied, or a
//     registry 401/403 in a pull error), ErrNotFound, ErrTimeout and
//     ErrNotCRI; IsTransient classifies them for retries. The same answers
//     come from their methods Unauthorized, Timeout and Transient, which is
//     how imagecache classifies them without importing this package.
//   - No credential is ever logged or put into an error: the secrets passed to
//     PullImage (Password, Auth, IdentityToken, RegistryToken) are removed
//     from the runtime's error text. PullImage logs only whether it has
//     credentials.
//   - ImageStatus answers "present?" exactly as the runtime resolves the
//     reference: nil means absent.
//   - ImageFsInfo reports the image filesystems only (mountpoint, used bytes
//     and inodes), and RuntimeVersion "<runtime_name>://<runtime_version>",
//     the form of the kubelet's containerRuntimeVersion.
//
// # Non-guarantees
//
//   - Only unix sockets. No TLS, no Windows named pipes.
//   - IsTransient reads the runtime's error text for pull failures reported
//     with code Unknown; a runtime that words errors differently may have
//     temporary registry failures classified as permanent (never the other
//     way round for a registry's 401/403).
//   - ListImages uses the unary call (no streaming); responses are capped at
//     16 MiB.
//   - ImageStatus and ListImages report what imageruntime.Image holds (ID,
//     tags, digests, size), not pinning.
//   - RuntimeVersion needs the runtime's RuntimeService on the same socket
//     (containerd and CRI-O serve both there); a runtime serving images on
//     a separate socket answers it Unimplemented.
//   - cri never prints an imageruntime.AuthConfig; how one prints if a caller
//     logs it is up to imageruntime.
package cri

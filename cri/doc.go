// Package cri adapts a CRI v1 image service (k8s.io/cri-api runtime.v1,
// gRPC over a unix socket) to the small image interfaces of this module:
// ListImages satisfies pullmanager.ImageLister, and ImageStatus, PullImage and
// RemoveImage are what imagecache needs.
//
// # Guarantees
//
//   - Dial accepts "unix:///path" and "/path". It fails with
//     ErrEndpointNotFound (naming the path) when there is no socket or nobody
//     answers on it, with ErrInvalidEndpoint for other schemes or a file that
//     is not a socket, and with ErrNotCRI when the server answers gRPC but
//     does not implement runtime.v1 ImageService. It checks with one
//     ImageFsInfo call, so a successful Dial means the image service answered.
//   - Every call has its own timeout (WithPullTimeout for PullImage,
//     WithCallTimeout for the rest), on top of the caller's context.
//   - Call errors are *CallError values carrying the gRPC code. errors.Is maps
//     them to ErrUnauthorized (Unauthenticated, PermissionDenied, or a
//     registry 401/403 in a pull error), ErrNotFound, ErrTimeout and
//     ErrNotCRI; IsTransient classifies them for retries.
//   - No credential is ever logged or put into an error: the secrets passed to
//     PullImage are removed from the runtime's error text, and AuthConfig
//     prints without them.
//   - ImageStatus answers "present?" exactly as the runtime resolves the
//     reference: nil means absent.
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
package cri

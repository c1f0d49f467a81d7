// Package criproxy is a CRI v1 proxy for a runtime shim: a gRPC server, for
// the kubelet to use as its container runtime endpoint, that forwards every
// call to the real runtime's connection unchanged, and lets a PullImage
// through only when a Gate admits it (for `pullrecords shim`: when the
// image's origin registry accepted the request's credential).
//
// Calls travel as raw frames: nothing is decoded on the way except the
// PullImage request (for the gate) and, after an admitted pull the runtime
// answered with OK, its response (for the gate's check of what was pulled).
// RuntimeDigest gives a gate the digest the runtime holds an image at.
//
// # Guarantees
//
//   - Every call of the RuntimeService and the ImageService, unary or
//     streaming, and every call of a service or method this build does not
//     know (a newer CRI, another API on the same socket), reaches the
//     runtime with the caller's bytes, and the caller gets the runtime's
//     bytes back. Metadata goes both ways: the caller's request metadata
//     (except what gRPC sets itself: content-type, user-agent,
//     pseudo-headers; the deadline travels as the deadline), the runtime's
//     header and trailer, and its status code, message and details.
//   - The caller's deadline and cancellation reach the runtime: a caller
//     that goes away cancels the call to the runtime. A caller's half-close
//     of a client or bidirectional stream becomes a half-close to the
//     runtime; a stream the runtime ends ends the caller's stream with the
//     runtime's status.
//   - "/runtime.v1.ImageService/PullImage" is decoded and given to
//     Gate.GatePull before the runtime is contacted; the runtime gets the
//     caller's original frame (not a re-encoding) only when the gate calls
//     its pull function, at most once. A refusal before the pull never
//     reaches the runtime; a refusal after it replaces the runtime's
//     answer. Either way the caller gets the gate's gRPC status as is, or
//     codes.Unknown with the error's message. A request that does not
//     decode is answered InvalidArgument (ErrMalformedPullImage) and never
//     forwarded; a runtime answer that does not decode is refused
//     (Internal, ErrUndecodableAnswer), as is a gate that returns nil
//     without pulling.
//   - Messages up to 16 MiB pass both ways, the kubelet's own bound.
//   - Nothing the proxy logs holds a credential: it logs the image and the
//     pod of a PullImage, never the request.
//   - Stop waits at most the stop timeout (WithStopTimeout) for calls in
//     flight, then closes every connection.
//   - Metrics (WithMetrics) count forwarded calls by method and code; a nil
//     *Metrics costs nothing but a nil check. Methods this build does not
//     know share the method label "unknown".
//
// # Non-guarantees
//
//   - The runtime sees the proxy's gRPC user-agent, not the kubelet's, and
//     the proxy's peer address.
//   - No TLS, no authentication of callers: serve on a unix socket only
//     the kubelet (root) can open. Whoever can reach the socket can do
//     everything the runtime allows.
//   - Only runtime.v1 PullImage is gated, and only it is forwarded: a
//     method named PullImage of any other service (containerd 1.6's
//     runtime.v1alpha2, a future version) is refused with PermissionDenied
//     and never reaches the runtime. Other methods of such services are
//     forwarded; cri-api v0.37.2's kubelet speaks v1 only. A pull method
//     under another name in a future CRI would pass ungated.
//   - The proxy does not retry, buffer or reorder: a runtime that is down
//     answers Unavailable through it, as it would directly.
//   - The proxy does not dial or close the runtime's connection; its
//     options (keepalive, backoff, reconnects) are the caller's.
package criproxy

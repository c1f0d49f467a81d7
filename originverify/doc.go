// Package originverify asks an image's origin registry, never a mirror,
// whether a credential may pull an image reference, and for the proof that
// the registry holds the image's content, for runtime shims that must not
// let a pull go on before the origin said yes (KEP-2535 on nodes whose
// runtime pulls through mirrors or peer-to-peer caches, which serve
// private images without asking for credentials, or skips the blobs its
// content store already holds).
//
// # Flow
//
// New builds a Verifier (HTTPS by default, plain HTTP for the registries
// WithInsecureRegistries names; WithContent gives it the node's content
// store). Prove parses the image as containerd does
// (github.com/distribution/reference, Docker Hub short names normalised,
// tag "latest" by default, a tag@digest reference asked by digest),
// decides which credential to present and then, through oras-go's
// auth.Client (Basic and Bearer challenges: realm, service and scope
// repository:<name>:pull, refresh-token POST, access token) with one
// token cache for the whole verification:
//
//  1. GETs the manifest (Accept: OCI index and manifest, Docker manifest
//     list and schema 2; at most 4 MiB) and hashes the bytes served: for a
//     digest reference they must hash to that digest (in its own
//     algorithm); for a tag the verified digest is their sha256. A
//     Docker-Content-Digest header that names another digest is a refusal;
//     no header is fine, the bytes decide.
//  2. For an index, GETs and hashes (against the index's descriptor, size
//     included) every child the runtime would use: those of the node's
//     platforms (linux and runtime.GOARCH by default, WithPlatforms;
//     variants not told apart; a child without a platform counts) and
//     every child the node's content already holds. Nested indexes are
//     followed three levels deep at most; a verification fetches at most
//     64 manifests.
//  3. For every image manifest, challenges each blob (config and layers)
//     the node already holds, the blobs the runtime would skip: a blob of
//     at most 4 KiB is fetched whole and hashed; a larger one is asked for
//     two 256-byte ranges at offsets drawn with crypto/rand for this
//     verification, each answer compared byte for byte with the node's
//     copy. A registry that ignores ranges (200) has its whole answer
//     streamed and hashed, up to WithMaxBlobBytes (512 MiB by default). A
//     blob the node does not hold is not asked for.
//
// Verify is Prove's digest. The Proof tells what was proven and what it
// cost (manifests, blobs challenged and fetched, bytes, requests).
//
// # Guarantees
//
//   - Every request goes to the registry the image names, host[:port] as
//     written, with docker.io (and its aliases index.docker.io and
//     registry-1.docker.io) asked at registry-1.docker.io as containerd
//     does. No mirror is ever consulted. A redirect of a manifest or token
//     request to another scheme or host[:port] is refused (ErrUnreachable)
//     without sending anything there. A blob request may be redirected to
//     the origin or to any HTTPS host (registries send blobs to a CDN),
//     never with an Authorization header; a plain-HTTP target on another
//     host is refused.
//   - A credential is presented only when it is not nil and its
//     ServerAddress is empty or names the image's registry (imageruntime.RegistryHost
//     equal to RegistryHost, Docker Hub's spellings being one registry);
//     otherwise the requests are anonymous, as containerd's. Username and
//     Password are used as given, or decoded from Auth (base64
//     "user:password") when both are empty; IdentityToken is the OAuth2
//     refresh token and RegistryToken the bearer access token. An Auth that
//     does not decode is refused before anything is sent.
//   - A nil error means the origin, with this credential (or anonymously,
//     when none was presented), served the manifest bytes that hash to the
//     returned digest (the requested one for a digest reference), served
//     every manifest of the node's platforms and of those the node holds
//     with bytes that hash to their descriptors, and answered every
//     challenge on every blob those name that the node holds, with the
//     node's bytes at random offsets or with the whole blob hashed.
//   - A descriptor whose size differs from the node's copy of that digest
//     is a refusal. Schema 1 manifests, manifests whose media type and
//     fields disagree, and deeper or larger walks are refused, not guessed
//     at.
//   - Every error is an *OriginError whose Error names registry,
//     repository, reference and HTTP status, and which wraps exactly one of
//     ErrDenied (401/403 from the registry or its token service, 400 from
//     the token service, other 4xx to the manifest the image names, a
//     challenge the credential cannot answer), ErrNotFound (404 to the
//     manifest the image names), ErrNotProven (manifest bytes that do not
//     hash to the digest, a digest header naming another digest, a blob or
//     child manifest answered with other bytes, another range, a truncated
//     body, a 404 or another size, a blob over the cap, too many or too
//     deeply nested manifests; its text says the registry did not prove
//     it holds the content, and the Message names what failed: "layer 3
//     sha256:ab12… of manifest sha256:cd34…: bytes 1024-1279 differ from
//     the node's copy"), ErrUnreachable (connection, DNS, TLS, timeout, a
//     body still arriving at the deadline, cancellation, 5xx, 408, 429, a
//     refused redirect, an unusable answer) or ErrInvalidReference. The
//     registry's own "errors[].message" is kept; the Message is at most
//     200 bytes.
//   - No error and no log line holds a credential: messages are scrubbed of
//     the password, the Auth field and the password decoded from it, both
//     tokens and every Authorization value sent (including tokens the token
//     service issued), even if the registry echoes them back.
//   - Every verification is bounded by ctx, or by 30 s (WithTimeout) when
//     ctx has no deadline. Nothing is cached between calls: each Prove
//     proves the credential and the content afresh, with a token cache of
//     its own and new random offsets (remembering a verification is the
//     caller's job, see credstamp). A Verifier is safe for concurrent use.
//
// # Non-guarantees
//
//   - A proof is about this moment and this reference: a tag may point
//     elsewhere after the proof and before the runtime's pull, and the
//     runtime's own pull (through a mirror, maybe) may fetch other content
//     than the digest proven unless the caller pins it or checks what was
//     pulled (crishim's post-pull check).
//   - The token service may live on another host (Docker Hub's
//     auth.docker.io); oras-go sends the credential there as the challenge
//     asks, refusing realms that are not http(s), plain-HTTP realms for an
//     HTTPS registry and private or loopback addresses other than the
//     registry's own host.
//   - The default transport honours HTTP_PROXY, HTTPS_PROXY and NO_PROXY,
//     as containerd does. Over HTTPS a proxy only tunnels; over plain HTTP
//     (WithInsecureRegistries) a proxy, like anything on the path, could
//     answer for the origin.
//   - No retries: one failed exchange is one refusal.
//   - Without WithContent (a runtime whose store cannot be read, e.g.
//     CRI-O), or when the content store cannot be asked, every blob is
//     fetched whole and hashed, so a blob over the cap is refused even
//     from an honest registry, and only the node's platforms of an index
//     are walked.
//
// # Proof of possession
//
// The threat (issue 32): tenant A's private image, manifest digest D, is on
// the node. Tenant B, with no credential, asks for E/bob/x@D, where E is a
// registry B controls that holds none of A's bytes and answers the manifest
// request with 200 and "Docker-Content-Digest: D". containerd resolves at E
// and skips every blob its content store holds: B's pod runs A's image. A
// registry's word is no proof that it holds the bytes, so a verification
// asks for the bytes themselves, and only those the runtime would not
// fetch, so that the runtime's own digest checks cover the rest.
//
// What the proof rests on. The manifest is hashed, so E must serve A's
// exact manifest bytes; the manifest names the config and layers by
// digest, so those are the blobs the runtime will use. Each of them the
// node holds is challenged: a small blob whole (its hash is the proof),
// a larger one by two 256-byte ranges at offsets no one knows before the
// verification asks, compared with the node's own copy. A registry that
// ignores ranges has its whole answer hashed; when that answer would be
// over the cap the refusal says so ("the registry ignores range requests
// and the blob is N bytes, over the M-byte cap").
//
// What a lying registry can still do.
//
//   - Hold part of a blob. A registry holding a fraction f of a blob's
//     bytes (and guessing the rest wrong) passes two independent random
//     ranges with probability about f² per blob, and must pass for every
//     held blob of the image. A manifest and small blobs are all or
//     nothing. Holding most of every layer of an image is, in practice,
//     holding the image.
//   - Hold all of it. A registry that holds the bytes has, by definition,
//     the image: it could serve it to anyone who asks, and a pod pulling
//     from it gets what it could have downloaded. This is the "same image
//     in two registries" case, and it is admitted on purpose: the proof is
//     of possession, not of authorship.
//   - Reach a snapshot without a blob. A runtime that skips a layer whose
//     unpacked snapshot exists, or that discarded its compressed layers
//     (containerd's discard_unpacked_layers), is protected only for the
//     blobs still in its content store. A crafted image whose config (a
//     blob the registry really holds) names another image's diff_ids, with
//     layers the node no longer holds, would reach that snapshot without
//     any challenge on the private bytes. Only a gate inside the runtime,
//     which sees which snapshots an unpack reuses (issue 33, "The gate
//     inside the runtime"), can close that; this package cannot.
//   - Move a tag between the proof and the pull: the runtime then pulls
//     another digest. The caller must check that the pulled digest is the
//     proven one (crishim does, and refuses otherwise).
//
// What it costs: one manifest GET per manifest walked (the image's, plus
// one per child of an index the node would use), two ranged GETs of 256
// bytes per blob the node holds, and the whole of each held blob of at
// most 4 KiB (usually the config); the token flow runs once per
// verification. For an image of 50 layers the node holds, that is about
// 26 KiB of blob bytes beyond the manifest, far under 64 KiB. Blobs the
// node does not hold cost nothing here: the runtime downloads and checks
// them itself.
package originverify

// Package originverify asks an image's origin registry, never a mirror,
// whether a credential may pull an image reference, for runtime shims that
// must not let a pull go on before the origin said yes (KEP-2535 on nodes
// whose runtime pulls through mirrors or peer-to-peer caches, which serve
// private images without asking for credentials).
//
// # Flow
//
// New builds a Verifier (HTTPS by default, plain HTTP for the registries
// WithInsecureRegistries names). Verify parses the image as containerd
// does (github.com/distribution/reference, Docker Hub short names
// normalised, tag "latest" by default, a tag@digest reference asked by
// digest), decides which credential to present, sends one manifest HEAD to
// the origin through oras-go's registry client (its auth.Client answers
// Basic and Bearer challenges: realm, service and scope, refresh-token
// POST, access token) and returns the digest the origin answered, or an
// *OriginError.
//
// # Guarantees
//
//   - The manifest request goes to the registry the image names, host[:port]
//     as written, with docker.io (and its aliases index.docker.io and
//     registry-1.docker.io) asked at registry-1.docker.io as containerd
//     does. No mirror is ever consulted, and a redirect of any request to
//     another scheme or host[:port] is refused (ErrUnreachable) without
//     sending anything there.
//   - A credential is presented only when it is not nil and its
//     ServerAddress is empty or names the image's registry (imageruntime.RegistryHost
//     equal to RegistryHost, Docker Hub's spellings being one registry);
//     otherwise the request is anonymous, as containerd's. Username and
//     Password are used as given, or decoded from Auth (base64
//     "user:password") when both are empty; IdentityToken is the OAuth2
//     refresh token and RegistryToken the bearer access token. An Auth that
//     does not decode is refused before anything is sent.
//   - A nil error means the origin answered 200 to the manifest HEAD for
//     this repository and reference with this credential (or anonymously,
//     when none was presented); for a digest reference the digest it
//     answered equals the one asked for, else ErrNotFound.
//   - Every error is an *OriginError whose Error names registry,
//     repository, reference and HTTP status, and which wraps exactly one of
//     ErrDenied (401/403 from the registry or its token service, 400 from
//     the token service, other 4xx from the registry, a challenge the
//     credential cannot answer), ErrNotFound (404, digest mismatch),
//     ErrUnreachable (connection, DNS, TLS, timeout, cancellation, 5xx, 408,
//     429, a refused redirect, an unusable answer) or ErrInvalidReference.
//     The registry's own "errors[].message" is kept, at most 200 bytes.
//   - No error and no log line holds a credential: messages are scrubbed of
//     the password, the Auth field and the password decoded from it, both
//     tokens and every Authorization value sent (including tokens the token
//     service issued), even if the registry echoes them back.
//   - Every request is bounded by ctx, or by 30 s (WithTimeout) when ctx has
//     no deadline. Nothing is cached between calls: each Verify proves the
//     credential afresh (remembering a verification is the caller's job, see
//     credstamp). A Verifier is safe for concurrent use.
//
// # Non-guarantees
//
//   - A yes from the origin is about this moment and this reference: a tag
//     may point elsewhere later, and the runtime's own pull (through a
//     mirror, maybe) may fetch other content than the digest returned here
//     unless the caller pins it.
//   - The token service may live on another host (Docker Hub's
//     auth.docker.io); oras-go sends the credential there as the challenge
//     asks, refusing realms that are not http(s), plain-HTTP realms for an
//     HTTPS registry and private or loopback addresses other than the
//     registry's own host.
//   - The default transport honours HTTP_PROXY, HTTPS_PROXY and NO_PROXY,
//     as containerd does. Over HTTPS a proxy only tunnels; over plain HTTP
//     (WithInsecureRegistries) a proxy, like anything on the path, could
//     answer for the origin.
//   - No retries: one failed exchange is one ErrUnreachable.
//   - Registries that do not send Docker-Content-Digest on a manifest HEAD
//     for a tag cannot be verified (ErrUnreachable); for a digest reference
//     the requested digest is trusted when the header is missing.
package originverify

// Package imageref answers the few questions the image-pull credential check
// asks about a pod's image string, without regular expressions and without
// allocating.
//
// Every function is defined by what github.com/distribution/reference
// v0.6.0 does with the same input, and is differential-tested (corpus and
// fuzzing) against it:
//
//   - Valid(s) reports whether reference.Parse(s) succeeds.
//   - TrimTagDigest(s) is the upstream kubelet's trimImageTagDigest
//     (k8s.io/kubernetes v1.37.2, pkg/kubelet/images/pullmanager): parse s
//     with reference.Parse, then cut "@"+digest and ":"+tag off the raw
//     string. No normalisation: "ubuntu:22.04" gives "ubuntu", and
//     "Registry.Example:5000/app@sha256:…" gives "Registry.Example:5000/app".
//   - NormalizedName(s) is reference.ParseNormalizedNamed(s).Name(), e.g.
//     "ubuntu:22.04" gives "docker.io/library/ubuntu".
//   - NormalizedNameParts(s) is the same name split as prefix+rest, where
//     prefix is "", "docker.io/" or "docker.io/library/" and rest is a
//     substring of s, for callers that want to avoid the concatenation.
//   - FamiliarName(s) is reference.FamiliarName(reference.ParseNormalizedNamed(s)),
//     e.g. "docker.io/library/ubuntu:22.04" gives "ubuntu".
//
// Guarantees:
//
//   - ok is false exactly when the corresponding upstream call returns an
//     error, and when ok is true the string equals upstream's result. Which
//     error upstream would have returned is not reported.
//   - Results are substrings of the input (they share its memory), except
//     NormalizedName when a "docker.io/" or "docker.io/library/" prefix must
//     be added; that case allocates the concatenation once. Nothing else
//     allocates, and on failure the returned string is "".
//   - Time is linear in len(s); each function reads s at most a small
//     constant number of times and stops at the first byte that cannot
//     belong to a valid reference. Anything outside ASCII is rejected.
//
// Digest algorithms. go-digest accepts a digest only if its algorithm's hash
// is linked into the program: "sha384:…" and "sha512:…" are rejected by
// reference.Parse in a binary that does not import crypto/sha512 (and
// "sha256:…" without crypto/sha256). This package imports both, so in any
// program that uses it the three algorithms are available to go-digest too,
// and both agree: a digest is "sha256:" + 64, "sha384:" + 96 or
// "sha512:" + 128 lowercase hex digits, and nothing else.
//
// No overall length limit. There is deliberately no MaxLength constant: no
// finite one exists. reference.Parse limits only the repository path (the
// name without its domain) to RepositoryNameTotalLengthMax (255) bytes; the
// domain, including a port of any number of digits or a bracketed IPv6
// literal, is unbounded, so "<10 000 letters>.example/app" is valid upstream
// and here. The path, tag and digest are bounded (MaxPathLength,
// MaxTagLength, MaxDigestLength), so the part of a valid reference after the
// domain is at most 1+MaxPathLength+1+MaxTagLength+1+MaxDigestLength bytes.
// Note that the 255 limit applies to the path as upstream splits it: in
// "a/<255 letters>" the first component is a domain and the name is 257
// bytes long yet valid, and NormalizedName("<250 letters>") fails because
// the path "library/<250 letters>" is too long although Valid accepts it.
package imageref

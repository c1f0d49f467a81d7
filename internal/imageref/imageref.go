package imageref

import (
	// go-digest only accepts algorithms whose hash is registered with
	// package crypto; linking these keeps reference.Parse and this package
	// in agreement about sha256, sha384 and sha512 (see doc.go).
	_ "crypto/sha256"
	_ "crypto/sha512"
	"strings"
)

const (
	// MaxPathLength is the longest repository path (the name without its
	// domain) reference.Parse accepts: RepositoryNameTotalLengthMax.
	MaxPathLength = 255
	// MaxTagLength is the longest tag: `[\w][\w.-]{0,127}`.
	MaxTagLength = 128
	// MaxDigestLength is the longest digest: "sha512:" and 128 hex digits.
	MaxDigestLength = len("sha512:") + 128
)

// Byte classes of the reference grammar.
const (
	cLower   uint8 = 1 << iota // a-z
	cUpper                     // A-Z
	cDigit                     // 0-9
	cHexLC                     // 0-9 a-f
	cHexAny                    // 0-9 a-f A-F
	cTagRest                   // \w . -

	cPathAlnum   = cLower | cDigit          // alphanumeric of a path component
	cDomainAlnum = cLower | cUpper | cDigit // alphanumeric of a domain label
	cWord        = cDomainAlnum             // \w without '_', which is handled apart
)

var class = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] |= cLower | cTagRest
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] |= cUpper | cTagRest
	}
	for c := '0'; c <= '9'; c++ {
		t[c] |= cDigit | cHexLC | cHexAny | cTagRest
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] |= cHexLC | cHexAny
		t[c-'a'+'A'] |= cHexAny
	}
	for _, c := range "_.-" {
		t[c] |= cTagRest
	}
	return t
}()

// Valid reports whether reference.Parse(s) succeeds.
func Valid(s string) bool {
	_, _, ok := scan(s, true)
	return ok
}

// TrimTagDigest returns s without its "@digest" and ":tag" suffixes, as the
// upstream kubelet's trimImageTagDigest does, or ok=false when
// reference.Parse(s) fails. The name is a prefix of s.
func TrimTagDigest(s string) (name string, ok bool) {
	end, _, ok := scan(s, true)
	if !ok {
		return "", false
	}
	return s[:end], true
}

// NormalizedName returns reference.ParseNormalizedNamed(s).Name(), or
// ok=false when ParseNormalizedNamed fails. It allocates only when the name
// needs a "docker.io/" or "docker.io/library/" prefix that s lacks.
func NormalizedName(s string) (name string, ok bool) {
	prefix, rest, ok := NormalizedNameParts(s)
	if prefix == "" {
		return rest, ok
	}
	return prefix + rest, true
}

// NormalizedNameParts returns the name NormalizedName would return as
// prefix+rest without concatenating them: prefix is "", "docker.io/" or
// "docker.io/library/", and rest is a substring of s. On failure all are
// zero.
func NormalizedNameParts(s string) (prefix, rest string, ok bool) {
	n, ok := normalize(s)
	if !ok {
		return "", "", false
	}
	switch n.kind {
	case hub:
		prefix = "docker.io/"
	case hubLibrary:
		prefix = "docker.io/library/"
	}
	return prefix, n.t[:n.nameEnd], true
}

// FamiliarName returns
// reference.FamiliarName(reference.ParseNormalizedNamed(s)), or ok=false when
// ParseNormalizedNamed fails: the normalised name with a "docker.io/" domain
// removed, and "library/" removed after it when one component follows. The
// result is always a substring of s.
func FamiliarName(s string) (name string, ok bool) {
	n, ok := normalize(s)
	if !ok {
		return "", false
	}
	name = n.t[:n.nameEnd]
	switch n.kind {
	case hubLibrary:
		// "docker.io/library/" + name, with name a single component.
		return name, true
	case hub:
		// "docker.io/" + name; name is the path.
	default:
		if n.pathStart == 0 || name[:n.pathStart] != "docker.io/" {
			return name, true
		}
		name = name[n.pathStart:]
	}
	if rest, found := strings.CutPrefix(name, "library/"); found && strings.IndexByte(rest, '/') < 0 {
		return rest, true
	}
	return name, true
}

// How ParseNormalizedNamed rewrites its input before parsing it.
const (
	asIs       = iota // parse t
	hub               // parse "docker.io/" + t
	hubLibrary        // parse "docker.io/library/" + t
)

type normalized struct {
	kind      int
	t         string // a substring of the input
	nameEnd   int    // the name ends at t[nameEnd]
	pathStart int    // for asIs: where the path starts in t (0: no domain)
}

// normalize follows ParseNormalizedNamed and its splitDockerDomain.
func normalize(s string) (n normalized, ok bool) {
	if isIdentifier(s) {
		// "cannot specify 64-byte hexadecimal strings"
		return n, false
	}

	// splitDockerDomain cuts at the first '/' of the whole string, tag and
	// digest included.
	remainder := s // the remote name as splitDockerDomain returns it, minus any "library/"
	first, after, found := strings.Cut(s, "/")
	switch {
	case !found:
		n = normalized{kind: hubLibrary, t: s}
	case first == "localhost":
		n = normalized{kind: asIs, t: s}
		remainder = after
	case first == "index.docker.io":
		remainder = after
		if strings.IndexByte(after, '/') < 0 {
			n = normalized{kind: hubLibrary, t: after}
		} else {
			// "docker.io/" + after is the tail of s itself.
			n = normalized{kind: asIs, t: s[len("index."):]}
		}
	case strings.ContainsAny(first, ".:") || hasUpper(first):
		remainder = after
		if first == "docker.io" && strings.IndexByte(after, '/') < 0 {
			n = normalized{kind: hubLibrary, t: after}
		} else {
			n = normalized{kind: asIs, t: s}
		}
	default:
		n = normalized{kind: hub, t: s}
	}

	// The remote name up to its first ':' must be lowercase. (Parse
	// enforces this too, for every input that reaches it; kept so the
	// steps match upstream's one for one.)
	remote := remainder
	if i := strings.IndexByte(remote, ':'); i >= 0 {
		remote = remote[:i]
	}
	if hasUpper(remote) {
		return normalized{}, false
	}

	end, pathStart, ok := scan(n.t, n.kind == asIs)
	if !ok {
		return normalized{}, false
	}
	if n.kind == hubLibrary && len("library/")+end > MaxPathLength {
		return normalized{}, false
	}
	n.nameEnd, n.pathStart = end, pathStart
	return n, true
}

// isIdentifier reports whether s is 64 lowercase hex digits.
func isIdentifier(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if class[s[i]]&cHexLC == 0 {
			return false
		}
	}
	return true
}

// hasUpper reports whether s contains an ASCII capital letter. (Upstream
// compares with strings.ToLower, which also changes non-ASCII capitals; any
// non-ASCII byte makes the reference invalid anyway.)
func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if class[s[i]]&cUpper != 0 {
			return true
		}
	}
	return false
}

// scan checks s against reference.Parse's grammar and length limit:
//
//	reference := name [":" tag] ["@" digest]
//	name      := [domain "/"] path
//
// It returns where the name ends and where its path starts (0 when the name
// has no domain). With allowDomain false the whole name must be a path, as
// when "docker.io/" is to be put in front of s.
func scan(s string, allowDomain bool) (nameEnd, pathStart int, ok bool) {
	// Neither the name, the tag nor the digest contains '@', so the first
	// '@' starts the digest.
	rest := s
	if at := strings.IndexByte(s, '@'); at >= 0 {
		if !validDigest(s[at+1:]) {
			return 0, 0, false
		}
		rest = s[:at]
	}

	// A name contains ':' only in a domain's port, and a domain is always
	// followed by '/', so a ':' after the last '/' starts the tag. Walk back
	// over tag characters: if they end at a ':', that is the tag;
	// otherwise there is no tag, and any ':' further back is for the name
	// check to judge.
	nameEnd = len(rest)
	i := len(rest) - 1
	for i >= 0 && class[rest[i]]&cTagRest != 0 {
		i--
	}
	if i >= 0 && rest[i] == ':' {
		if !validTag(rest[i+1:]) {
			return 0, 0, false
		}
		nameEnd = i
	}
	name := rest[:nameEnd]

	slash := strings.IndexByte(name, '/')
	switch {
	case slash < 0:
		if !validPath(name) {
			return 0, 0, false
		}
	case !validPath(name[slash+1:]):
		return 0, 0, false
	case allowDomain && validDomain(name[:slash]):
		// The regexp prefers a domain whenever the first component is one.
		pathStart = slash + 1
	case !validPath(name[:slash]):
		return 0, 0, false
	}
	if nameEnd-pathStart > MaxPathLength {
		return 0, 0, false
	}
	return nameEnd, pathStart, true
}

// validPath reports whether p is one or more '/'-separated path components:
//
//	component := [a-z0-9]+ (separator [a-z0-9]+)*
//	separator := "." | "_" | "__" | "-"+
func validPath(p string) bool {
	i, n := 0, len(p)
	for {
		if i >= n || class[p[i]]&cPathAlnum == 0 {
			return false
		}
		for i++; i < n && class[p[i]]&cPathAlnum != 0; i++ {
		}
		if i == n {
			return true
		}
		switch p[i] {
		case '.', '/':
			i++
		case '_':
			i++
			if i < n && p[i] == '_' {
				i++
			}
		case '-':
			for i++; i < n && p[i] == '-'; i++ {
			}
		default:
			return false
		}
	}
}

// validDomain reports whether d is a host with an optional port:
//
//	domain := (label ("." label)* | "[" [0-9a-fA-F:]+ "]") [":" [0-9]+]
//	label  := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
func validDomain(d string) bool {
	i, n := 0, len(d)
	if n > 0 && d[0] == '[' {
		for i = 1; i < n && (class[d[i]]&cHexAny != 0 || d[i] == ':'); i++ {
		}
		if i == 1 || i == n || d[i] != ']' {
			return false
		}
		i++
	} else {
		for {
			if i >= n || class[d[i]]&cDomainAlnum == 0 {
				return false
			}
			for i++; i < n && (class[d[i]]&cDomainAlnum != 0 || d[i] == '-'); i++ {
			}
			if d[i-1] == '-' {
				return false
			}
			if i < n && d[i] == '.' {
				i++
				continue
			}
			break
		}
	}
	if i == n {
		return true
	}
	if d[i] != ':' || i+1 == n {
		return false
	}
	for i++; i < n; i++ {
		if class[d[i]]&cDigit == 0 {
			return false
		}
	}
	return true
}

// validTag reports whether t matches `[\w][\w.-]{0,127}`; the caller has
// already checked that every byte is in [\w.-].
func validTag(t string) bool {
	return len(t) >= 1 && len(t) <= MaxTagLength && (class[t[0]]&cWord != 0 || t[0] == '_')
}

// validDigest reports whether reference.Parse accepts d after the '@': its
// regexp admits many algorithms, but go-digest then requires a known one
// with exactly its length in lowercase hex.
func validDigest(d string) bool {
	if len(d) < len("sha256:") || d[:len("sha")] != "sha" || d[len("sha256")] != ':' {
		return false
	}
	var hexLen int
	switch d[len("sha"):len("sha256")] {
	case "256":
		hexLen = 64
	case "384":
		hexLen = 96
	case "512":
		hexLen = 128
	default:
		return false
	}
	h := d[len("sha256:"):]
	if len(h) != hexLen {
		return false
	}
	for i := 0; i < len(h); i++ {
		if class[h[i]]&cHexLC == 0 {
			return false
		}
	}
	return true
}

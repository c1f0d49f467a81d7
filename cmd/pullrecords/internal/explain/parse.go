package explain

import (
	"fmt"
	"strings"

	"github.com/pullrecords/pullrecords/accessor"
)

// HashLen is the length of a credential hash: the lowercase hex SHA-256
// the kubelet computes.
const HashLen = 64

// ParseSecret parses "namespace/name/uid" (a secret whose credential hash is
// not known) or "namespace/name/uid:hash", where hash is the full credential
// hash: 64 hex digits. A shortened hash, as a table shows it, is refused: it
// would never equal a recorded hash, and the answer would be wrong.
func ParseSecret(s string) (accessor.ImagePullSecret, error) {
	coords, hash, hasHash := strings.Cut(s, ":")
	ns, name, uid, err := splitTriple(coords)
	if err != nil {
		return accessor.ImagePullSecret{}, fmt.Errorf("%w: secret %q: %v (want namespace/name/uid[:hash])", ErrBadCredential, s, err)
	}
	if hasHash {
		if hash, err = checkHash(hash); err != nil {
			return accessor.ImagePullSecret{}, fmt.Errorf("%w: secret %q: %v", ErrBadCredential, s, err)
		}
	}
	return accessor.ImagePullSecret{UID: uid, Namespace: ns, Name: name, CredentialHash: hash}, nil
}

// checkHash checks that h is a full credential hash and returns it in
// lowercase, as the kubelet writes it.
func checkHash(h string) (string, error) {
	const where = `the full hash is in "pullrecords get -o json IMAGEREF"; leave out ":hash" if it is not known`
	if h == "" {
		return "", fmt.Errorf("empty credential hash after \":\" (%s)", where)
	}
	for _, c := range h {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return "", fmt.Errorf("credential hash is not hexadecimal: want the full SHA-256, %d hex digits (%s)", HashLen, where)
		}
	}
	if len(h) != HashLen {
		return "", fmt.Errorf("credential hash has %d hex digits, want the full SHA-256 of %d: a shortened hash never matches a recorded one (%s)",
			len(h), HashLen, where)
	}
	return strings.ToLower(h), nil
}

// ParseServiceAccount parses "namespace/name/uid".
func ParseServiceAccount(s string) (accessor.ImagePullServiceAccount, error) {
	ns, name, uid, err := splitTriple(s)
	if err != nil {
		return accessor.ImagePullServiceAccount{}, fmt.Errorf("%w: service account %q: %v (want namespace/name/uid)", ErrBadCredential, s, err)
	}
	return accessor.ImagePullServiceAccount{UID: uid, Namespace: ns, Name: name}, nil
}

func splitTriple(s string) (a, b, c string, err error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("%d parts", len(parts))
	}
	for _, p := range parts {
		if p == "" {
			return "", "", "", fmt.Errorf("empty part")
		}
	}
	return parts[0], parts[1], parts[2], nil
}

package explain

import (
	"fmt"
	"strings"

	"github.com/pullrecords/pullrecords/accessor"
)

// ParseSecret parses "namespace/name/uid" or "namespace/name/uid:hash".
func ParseSecret(s string) (accessor.ImagePullSecret, error) {
	coords, hash, _ := strings.Cut(s, ":")
	ns, name, uid, err := splitTriple(coords)
	if err != nil {
		return accessor.ImagePullSecret{}, fmt.Errorf("%w: secret %q: %v (want namespace/name/uid[:hash])", ErrBadCredential, s, err)
	}
	return accessor.ImagePullSecret{UID: uid, Namespace: ns, Name: name, CredentialHash: hash}, nil
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

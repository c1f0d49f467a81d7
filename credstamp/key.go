package credstamp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// Key names one verification: a credential (a credential hash, or a fixed
// word such as "node" or "anonymous"; never a secret itself) that proved at
// an image's origin registry that it may pull Repository at Digest.
type Key struct {
	Credential string
	Repository string
	Digest     string
}

// fileNameLen is the length of every stamp file name: hex SHA-256.
const fileNameLen = 2 * sha256.Size

// validate reports why k cannot be stamped, or nil.
func (k Key) validate() error {
	for _, f := range [...]struct{ name, value string }{
		{"credential", k.Credential},
		{"repository", k.Repository},
		{"digest", k.Digest},
	} {
		if f.value == "" {
			return fmt.Errorf("%w: empty %s", ErrInvalidKey, f.name)
		}
		if !utf8.ValidString(f.value) {
			return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidKey, f.name)
		}
	}
	return nil
}

// fileName returns the name of k's file: the lowercase hex SHA-256 of the
// three fields, each preceded by its length as 8 big-endian bytes, so no
// two keys (however their fields run together) share a name.
func (k Key) fileName() string {
	h := sha256.New()
	var n [8]byte
	for _, f := range [...]string{k.Credential, k.Repository, k.Digest} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// isStampFileName reports whether name could be a Key's fileName.
func isStampFileName(name string) bool {
	return len(name) == fileNameLen && isLowerHex(name)
}

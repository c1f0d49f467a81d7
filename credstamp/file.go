package credstamp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// fileVersion is the only version of the file format.
const fileVersion = 1

// maxFileSize bounds what Open reads of one file; a stamp this package
// writes is far smaller unless a repository name is absurdly long.
const maxFileSize = 16 << 10

// stampFile is the content of one stamp file.
type stampFile struct {
	Version    int    `json:"version"`
	Credential string `json:"credential"`
	Repository string `json:"repository"`
	Digest     string `json:"digest"`
	VerifiedAt string `json:"verifiedAt"`
}

// encodeStamp returns the file content for k verified at t: compact JSON
// and a newline, the time in UTC with nanoseconds (RFC 3339). A time whose
// UTC year has no four-digit RFC 3339 form is refused: it could not be read
// back.
func encodeStamp(k Key, t time.Time) ([]byte, error) {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("verification time %v is outside the years 0000-9999", t)
	}
	b, err := json.Marshal(stampFile{
		Version:    fileVersion,
		Credential: k.Credential,
		Repository: k.Repository,
		Digest:     k.Digest,
		VerifiedAt: t.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeStamp parses the file name with content data. Anything but exactly
// what encodeStamp writes for a key whose fileName is name is an error
// matching ErrInvalidStampFile: unknown fields, trailing data, another
// version, an empty or non-UTF-8 field, a time that is not in the form
// encodeStamp writes (UTC, RFC 3339), or a key that belongs to another file
// name (a copied or renamed file).
func decodeStamp(name string, data []byte) (Key, time.Time, error) {
	fail := func(format string, args ...any) (Key, time.Time, error) {
		return Key{}, time.Time{}, fmt.Errorf("%w: %s", ErrInvalidStampFile, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f stampFile
	if err := dec.Decode(&f); err != nil {
		return fail("not a stamp: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail("data after the stamp")
	}
	if f.Version != fileVersion {
		return fail("version %d, want %d", f.Version, fileVersion)
	}
	k := Key{Credential: f.Credential, Repository: f.Repository, Digest: f.Digest}
	if err := k.validate(); err != nil {
		return fail("%v", err)
	}
	if k.fileName() != name {
		return fail("the stamp belongs to another file name")
	}
	t, err := time.Parse(time.RFC3339Nano, f.VerifiedAt)
	if err != nil {
		return fail("verifiedAt: %v", err)
	}
	if t.UTC().Format(time.RFC3339Nano) != f.VerifiedAt {
		return fail("verifiedAt %q is not written in UTC as this package writes it", f.VerifiedAt)
	}
	return k, t, nil
}

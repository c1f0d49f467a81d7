package originverify

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

var (
	// ErrDenied means the origin registry did not accept the credential (or
	// the absence of one) for pulling the reference: HTTP 401 or 403 from
	// the registry or its token service, or a credential that could not be
	// presented at all.
	ErrDenied = errors.New("access denied by the origin registry")
	// ErrNotFound means the origin registry does not hold the reference
	// (HTTP 404), or answered a digest reference with another digest.
	ErrNotFound = errors.New("not found at the origin registry")
	// ErrUnreachable means no usable answer came from the origin registry:
	// the connection, TLS or DNS failed, the request timed out or was
	// cancelled, the registry answered 5xx or 429, redirected the manifest
	// request to another host, or answered in a form that cannot be used.
	ErrUnreachable = errors.New("origin registry unreachable")
	// ErrInvalidReference means the image string is not a valid reference.
	ErrInvalidReference = errors.New("invalid image reference")
	// ErrNotProven means the registry answered but did not prove that it
	// holds the image's content: manifest bytes that do not hash to the
	// digest, a digest header naming another digest, a challenged blob
	// answered with other bytes, another range, a truncated body, a 404 or
	// another size, a blob over the cap of a registry that ignores ranges,
	// or more manifests than a verification walks.
	ErrNotProven = errors.New("the registry did not prove it holds the image's content")
)

// OriginError is the error Verify returns. Error names the registry, the
// repository, the reference asked for and the HTTP status; Unwrap gives
// one of ErrDenied, ErrNotFound, ErrUnreachable, ErrNotProven or
// ErrInvalidReference. No
// field ever holds a credential: Message is scrubbed of every secret the
// request carried before it is stored.
type OriginError struct {
	// Registry is the registry host as RegistryHost gives it ("docker.io"
	// for Docker Hub).
	Registry string
	// Repository is the repository path ("library/busybox").
	Repository string
	// Reference is the tag or digest asked for, or for ErrInvalidReference
	// the image string (truncated).
	Reference string
	// StatusCode is the HTTP status that decided the outcome, 0 if none.
	StatusCode int
	// Message is the registry's own error message ("errors[].message",
	// at most 200 bytes) or the reason the answer could not be used.
	Message string
	// Err is the sentinel.
	Err error
}

// Error names the registry, repository, reference, outcome and status.
func (e *OriginError) Error() string {
	var b strings.Builder
	if e.Registry != "" {
		fmt.Fprintf(&b, "origin registry %s, repository %s, reference %s: ", e.Registry, e.Repository, e.Reference)
	} else {
		fmt.Fprintf(&b, "image %q: ", e.Reference)
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("verification failed")
	}
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, " (HTTP %d %s)", e.StatusCode, http.StatusText(e.StatusCode))
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns the sentinel.
func (e *OriginError) Unwrap() error { return e.Err }

// maxMessageBytes bounds the registry's message kept in an OriginError.
const maxMessageBytes = 200

// maxReferenceInError bounds an invalid image string kept in an error.
const maxReferenceInError = 300

// truncate cuts s to at most max bytes (the mark of the cut included) on a
// rune boundary.
func truncate(s string, max int) string {
	const mark = "…"
	if len(s) <= max {
		return s
	}
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// printable replaces control characters (a registry's message may hold
// new lines or escapes) by spaces.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
}

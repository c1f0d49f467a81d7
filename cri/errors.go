package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrInvalidEndpoint is returned by Dial for an endpoint that is neither
	// "unix:///path" nor an absolute path.
	ErrInvalidEndpoint = errors.New("invalid CRI endpoint")
	// ErrEndpointNotFound is returned by Dial when the socket does not exist
	// or nothing listens on it (connection refused). The error text names
	// the path.
	ErrEndpointNotFound = errors.New("CRI endpoint not found")
	// ErrNotCRI is returned by Dial when something listens on the endpoint
	// but is not a CRI v1 image service: it does not answer gRPC, or its gRPC
	// server does not serve runtime.v1 ImageService.
	ErrNotCRI = errors.New("endpoint does not serve the CRI v1 image service")
	// ErrUnauthorized matches a pull the registry refused for lack of (valid)
	// credentials, and the gRPC codes Unauthenticated and PermissionDenied.
	ErrUnauthorized = errors.New("registry refused the credentials")
	// ErrNotFound matches the gRPC code NotFound (for example an unknown
	// image or tag).
	ErrNotFound = errors.New("not found")
	// ErrTimeout matches a call that ran out of its per-call timeout.
	ErrTimeout = errors.New("CRI call timed out")
	// ErrClosed is returned by calls on a closed ImageService.
	ErrClosed = errors.New("CRI image service closed")
	// ErrInvalidOption is returned by Dial for an Option given a value it
	// cannot use; the error names the option and the value.
	ErrInvalidOption = errors.New("invalid CRI option")
)

// CallError is the error of one CRI call. Its message never contains a
// credential: any credential passed to the call is removed from the server's
// text before it is stored here.
type CallError struct {
	// Op is the CRI method, for example "PullImage".
	Op string
	// Image is the image the call was about, if any.
	Image string
	// Code is the gRPC status code (codes.DeadlineExceeded for a local
	// timeout, codes.Canceled for a cancelled context).
	Code codes.Code
	// Message is the server's message, with credentials redacted.
	Message string
}

// Unauthorized reports whether the registry or the runtime refused the
// credentials: gRPC Unauthenticated or PermissionDenied, or a registry's
// 401/403 in the runtime's text. It is errors.Is(e, ErrUnauthorized), as a
// method so that packages that do not import cri (imagecache) can read it.
func (e *CallError) Unauthorized() bool {
	return e.Code == codes.Unauthenticated || e.Code == codes.PermissionDenied || looksUnauthorized(e.Message)
}

// Timeout reports whether the call ran out of time (gRPC DeadlineExceeded,
// including the per-call timeout). It is errors.Is(e, ErrTimeout), and the
// method net.Error and context.DeadlineExceeded have too.
func (e *CallError) Timeout() bool { return e.Code == codes.DeadlineExceeded }

func (e *CallError) Error() string {
	if e.Image != "" {
		return fmt.Sprintf("CRI %s %q: %s: %s", e.Op, e.Image, e.Code, e.Message)
	}
	return fmt.Sprintf("CRI %s: %s: %s", e.Op, e.Code, e.Message)
}

// Is maps the call's code to the package's sentinels.
func (e *CallError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Unauthorized()
	case ErrNotFound:
		return e.Code == codes.NotFound
	case ErrTimeout:
		return e.Timeout()
	case ErrNotCRI:
		return e.Code == codes.Unimplemented
	case context.Canceled:
		return e.Code == codes.Canceled
	case context.DeadlineExceeded:
		return e.Code == codes.DeadlineExceeded
	}
	return false
}

// Transient reports whether retrying the same call may succeed (see
// IsTransient). Unauthorized, Timeout and Transient are the methods
// imagecache classifies an image service's errors by.
func (e *CallError) Transient() bool {
	if e.Unauthorized() {
		return false
	}
	switch e.Code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	case codes.Unknown, codes.Internal:
		// Runtimes report registry and network failures of a pull with
		// these codes; only clearly temporary ones are retried.
		return looksTemporary(e.Message)
	}
	return false
}

// IsTransient reports whether err is worth retrying: gRPC Unavailable,
// DeadlineExceeded (including a per-call timeout), ResourceExhausted and
// Aborted, and pull failures whose text shows a temporary registry or network
// problem (connection refused or reset, i/o timeout, HTTP 429/502/503/504).
// NotFound, InvalidArgument, Unauthenticated, PermissionDenied, a registry's
// 401/403, a cancelled context, and anything unclassified are permanent.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Transient()
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if s, ok := status.FromError(err); ok {
		return (&CallError{Code: s.Code(), Message: s.Message()}).Transient()
	}
	return false
}

// looksUnauthorized recognises a registry's refusal in a runtime's pull error
// text (containerd and CRI-O both pass the HTTP status through).
func looksUnauthorized(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"401 unauthorized", "403 forbidden", "unauthorized:", "authentication required", "denied: requested access"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func looksTemporary(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"connection refused", "connection reset", "i/o timeout", "tls handshake timeout",
		"429 too many requests", "502 bad gateway", "503 service unavailable", "504 gateway timeout", "unexpected eof"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// newCallError converts a gRPC error into a *CallError, removing every
// secret in redact from the server's message.
func newCallError(op, image string, err error, redact ...string) *CallError {
	code := codes.Unknown
	msg := err.Error()
	if s, ok := status.FromError(err); ok {
		code, msg = s.Code(), s.Message()
	} else if errors.Is(err, context.DeadlineExceeded) {
		code = codes.DeadlineExceeded
	} else if errors.Is(err, context.Canceled) {
		code = codes.Canceled
	}
	for _, r := range redact {
		if len(r) >= 3 { // shorter strings would blank out unrelated text
			msg = strings.ReplaceAll(msg, r, "[redacted]")
		}
	}
	return &CallError{Op: op, Image: image, Code: code, Message: msg}
}

// AsCallError returns the error of the CRI call op (a method name such as
// "PullImage") about image made through another CRI client, such as a
// kubelet's own image service, whose errors are the runtime's gRPC status
// errors (possibly wrapped), as a *CallError: errors.Is against this
// package's sentinels, IsTransient, and imagecache's classification
// (Unauthorized, Timeout, Transient) then treat it exactly as an error of
// this package's ImageService. Every string of redact (the credentials
// passed to the call) is removed from the message. A *CallError already in
// err's chain is returned as it is, and nil stays nil.
func AsCallError(op, image string, err error, redact ...string) error {
	if err == nil {
		return nil
	}
	var ce *CallError
	if errors.As(err, &ce) {
		return err
	}
	return newCallError(op, image, err, redact...)
}

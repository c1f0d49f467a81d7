package originverify

import (
	"context"
	"net/http"
	"time"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// userAgent is sent with every request.
const userAgent = "pullrecords-originverify"

// Verifier asks an image's origin registry whether a credential may pull
// it, and for the proof that the registry holds the image's content. It
// is safe for concurrent use; it keeps no state between calls but the
// transport's idle connections.
type Verifier struct {
	transport    http.RoundTripper
	insecure     map[string]bool
	timeout      time.Duration
	content      imageruntime.Content
	maxBlobBytes int64
	platforms    []Platform
}

// New returns a Verifier speaking HTTPS to every registry unless told
// otherwise by WithInsecureRegistries.
func New(opts ...Option) *Verifier {
	v := &Verifier{
		transport:    http.DefaultTransport.(*http.Transport).Clone(),
		insecure:     map[string]bool{},
		timeout:      DefaultTimeout,
		maxBlobBytes: DefaultMaxBlobBytes,
		platforms:    defaultPlatforms(),
	}
	for _, opt := range opts {
		opt(v)
	}
	return v
}

// Verify asks the origin registry of image for the proof that auth may
// pull it and that the registry holds its content (Prove), and returns the
// verified manifest digest. auth is presented only when it is not nil and
// its ServerAddress is empty or names the image's registry; otherwise the
// requests are anonymous. Every error is an *OriginError wrapping
// ErrDenied, ErrNotFound, ErrUnreachable, ErrNotProven or
// ErrInvalidReference.
func (v *Verifier) Verify(ctx context.Context, image string, a *imageruntime.AuthConfig) (string, error) {
	proof, err := v.Prove(ctx, image, a)
	if err != nil {
		return "", err
	}
	return proof.Digest, nil
}

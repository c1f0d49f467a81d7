package originverify

import (
	"net/http"
	"time"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// DefaultTimeout bounds one Verify whose context has no deadline.
const DefaultTimeout = 30 * time.Second

// Option configures a Verifier.
type Option func(*Verifier)

// WithInsecureRegistries makes Verify speak plain HTTP to these registries
// (host[:port], as RegistryHost gives them; a scheme or path is ignored).
// Every other registry is asked over HTTPS.
func WithInsecureRegistries(hosts ...string) Option {
	return func(v *Verifier) {
		for _, h := range hosts {
			if h = imageruntime.RegistryHost(h); h != "" {
				v.insecure[h] = true
			}
		}
	}
}

// WithTransport sets the HTTP transport every request goes through (tests
// use it to reach httptest servers; the default is a clone of
// http.DefaultTransport). Redirect and origin checks stay on top of it.
func WithTransport(rt http.RoundTripper) Option {
	return func(v *Verifier) {
		if rt != nil {
			v.transport = rt
		}
	}
}

// WithTimeout bounds one Verify whose context has no deadline (default
// DefaultTimeout). A context with a deadline keeps its own. A duration of
// zero or less keeps the default.
func WithTimeout(d time.Duration) Option {
	return func(v *Verifier) {
		if d > 0 {
			v.timeout = d
		}
	}
}

// DefaultMaxBlobBytes caps a blob fetched whole (from a registry that
// ignores range requests, or without the node's content to compare with).
const DefaultMaxBlobBytes = 512 << 20

// WithContent gives Verify read access to the blobs the node's runtime
// already holds (containerd's content store): those are the blobs the
// runtime would skip fetching, so those are the ones the registry is
// challenged on, with ranges compared to the node's copy. Without it
// (nil, e.g. CRI-O) every blob is fetched whole and hashed, up to
// WithMaxBlobBytes.
func WithContent(c imageruntime.Content) Option {
	return func(v *Verifier) { v.content = c }
}

// WithMaxBlobBytes caps a blob fetched whole (default DefaultMaxBlobBytes);
// a blob above it that cannot be challenged by ranges is a refusal. Zero
// or less keeps the default.
func WithMaxBlobBytes(n int64) Option {
	return func(v *Verifier) {
		if n > 0 {
			v.maxBlobBytes = n
		}
	}
}

// WithPlatforms sets the platforms whose manifests of an index are walked
// (default linux and runtime.GOARCH). Children the node's content already
// holds are walked whatever their platform. An empty list keeps the
// default.
func WithPlatforms(p ...Platform) Option {
	return func(v *Verifier) {
		if len(p) > 0 {
			v.platforms = append([]Platform(nil), p...)
		}
	}
}

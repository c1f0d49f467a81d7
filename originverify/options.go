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

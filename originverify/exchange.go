package originverify

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// exchange is the transport of one Verify: it passes requests on and
// remembers what classifying the outcome, scrubbing messages and the
// Proof's cost need (the Authorization values sent, the last status, the
// requests sent and the body bytes read). It never lets an Authorization
// header leave for another host on a blob request.
type exchange struct {
	base http.RoundTripper
	// originScheme and originHost are the origin's ("http" or "https",
	// host[:port]); blobPrefix is the path of the repository's blobs there
	// ("/v2/<repository>/blobs/").
	originScheme, originHost, blobPrefix string

	requests atomic.Int64
	bytes    atomic.Int64

	mu         sync.Mutex
	sentAuth   []string
	lastStatus int
}

func (x *exchange) RoundTrip(req *http.Request) (*http.Response, error) {
	if x.isBlob(firstOf(req).URL) && !x.isOrigin(req.URL) && req.Header.Get("Authorization") != "" {
		req = req.Clone(req.Context())
		req.Header.Del("Authorization")
	}
	authorization := req.Header.Get("Authorization")
	x.requests.Add(1)
	resp, err := x.base.RoundTrip(req)
	x.mu.Lock()
	defer x.mu.Unlock()
	if authorization != "" {
		x.sentAuth = append(x.sentAuth, authorization)
	}
	if err != nil {
		return resp, err
	}
	x.lastStatus = resp.StatusCode
	if resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &x.bytes}
	}
	return resp, nil
}

// isOrigin tells whether u is at the origin's scheme and host[:port].
func (x *exchange) isOrigin(u *url.URL) bool {
	return strings.EqualFold(u.Scheme, x.originScheme) && strings.EqualFold(u.Host, x.originHost)
}

// isBlob tells whether u is a blob of the repository at the origin: the
// first request of a chain of redirects that may leave the origin. A token
// request, even one sent while a blob is asked for, is not.
func (x *exchange) isBlob(u *url.URL) bool {
	return x.isOrigin(u) && strings.HasPrefix(u.Path, x.blobPrefix)
}

// firstOf is the first request of req's chain of redirects.
func firstOf(req *http.Request) *http.Request {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request
	}
	return req
}

// countingBody adds every byte read to n.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// sentSecrets lists every Authorization value sent, whole and without its
// scheme word, for scrubbing.
func (x *exchange) sentSecrets() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var secrets []string
	for _, value := range x.sentAuth {
		secrets = append(secrets, value)
		if _, credential, ok := strings.Cut(value, " "); ok {
			secrets = append(secrets, strings.TrimSpace(credential))
		}
	}
	return secrets
}

// status returns the last status seen.
func (x *exchange) status() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lastStatus
}

// redirectRefusedError is returned for a redirect to a place the request
// may not go.
type redirectRefusedError struct{ from, to, why string }

func (e *redirectRefusedError) Error() string {
	return fmt.Sprintf("redirect from %s to %s refused: %s", e.from, e.to, e.why)
}

// maxRedirects bounds the redirects of one request.
const maxRedirects = 10

// checkRedirect is the CheckRedirect of every Verify. A manifest or token
// request must keep the scheme and host[:port] of its first request. A blob
// request may go to the origin or to any HTTPS host (registries send blobs
// to a CDN), never with an Authorization header; plain HTTP to another
// host is refused.
func (x *exchange) checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	sameOrigin := strings.EqualFold(req.URL.Scheme, first.Scheme) && strings.EqualFold(req.URL.Host, first.Host)
	refused := func(why string) error {
		return &redirectRefusedError{from: first.Scheme + "://" + first.Host, to: req.URL.Scheme + "://" + req.URL.Host, why: why}
	}
	switch {
	case sameOrigin:
	case !x.isBlob(first):
		return refused("only the origin may answer")
	case !strings.EqualFold(req.URL.Scheme, "https"):
		return refused("a blob may leave the origin only for HTTPS")
	default:
		req.Header.Del("Authorization")
		req.Header.Del("Cookie")
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

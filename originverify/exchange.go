package originverify

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// exchange is the transport of one Verify: it passes requests on and
// remembers what classifying the outcome and scrubbing messages need (the
// Authorization values sent, the last status, the manifest answer).
type exchange struct {
	base         http.RoundTripper
	manifestPath string

	mu             sync.Mutex
	sentAuth       []string
	lastStatus     int
	manifestStatus int
	manifestDigest string
}

func (x *exchange) RoundTrip(req *http.Request) (*http.Response, error) {
	authorization := req.Header.Get("Authorization")
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
	if req.URL.Path == x.manifestPath {
		x.manifestStatus = resp.StatusCode
		x.manifestDigest = resp.Header.Get("Docker-Content-Digest")
	}
	return resp, nil
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

// snapshot returns the recorded statuses and digest.
func (x *exchange) snapshot() (lastStatus, manifestStatus int, manifestDigest string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lastStatus, x.manifestStatus, x.manifestDigest
}

// redirectRefusedError is returned for a redirect to another origin.
type redirectRefusedError struct{ from, to string }

func (e *redirectRefusedError) Error() string {
	return fmt.Sprintf("redirect from %s to %s refused: only the origin may answer", e.from, e.to)
}

// maxRedirects bounds redirects within the origin.
const maxRedirects = 10

// onlyOriginRedirects is the CheckRedirect of every Verify: a redirect
// must keep the scheme and host[:port] of the first request.
func onlyOriginRedirects(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if !strings.EqualFold(req.URL.Scheme, first.Scheme) || !strings.EqualFold(req.URL.Host, first.Host) {
		return &redirectRefusedError{from: first.Scheme + "://" + first.Host, to: req.URL.Scheme + "://" + req.URL.Host}
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

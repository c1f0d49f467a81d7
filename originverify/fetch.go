package originverify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// session is one verification: the target, the authenticated client (one
// auth.Cache, so one token flow serves every request, nothing carried to
// the next verification), the node's content and the running cost.
type session struct {
	t              target
	x              *exchange
	client         *auth.Client
	base           string // scheme://endpoint
	credentialSent bool
	content        imageruntime.Content
	platforms      []Platform
	maxBlobBytes   int64

	manifests       int
	blobsChallenged int
	blobsFetched    int
	// seen holds the blobs already proven in this verification (a layer
	// shared between platforms is challenged once).
	seen map[string]bool
}

func (v *Verifier) newSession(t target, cred auth.Credential) *session {
	scheme := "https"
	if v.insecure[t.registry] {
		scheme = "http"
	}
	x := &exchange{base: v.transport, originScheme: scheme, originHost: t.endpoint, blobPrefix: "/v2/" + t.repository + "/blobs/"}
	client := &auth.Client{
		Client: &http.Client{Transport: x, CheckRedirect: x.checkRedirect},
		Header: http.Header{"User-Agent": {userAgent}},
		Cache:  auth.NewCache(),
		Credential: func(_ context.Context, hostport string) (auth.Credential, error) {
			if hostport == t.endpoint {
				return cred, nil
			}
			return auth.EmptyCredential, nil
		},
	}
	return &session{
		t: t, x: x, client: client, base: scheme + "://" + t.endpoint,
		credentialSent: cred != auth.EmptyCredential,
		content:        v.content,
		platforms:      v.platforms,
		maxBlobBytes:   v.maxBlobBytes,
		seen:           map[string]bool{},
	}
}

// scoped asks the token service for pull on the repository, and nothing
// else.
func (s *session) scoped(ctx context.Context) context.Context {
	return auth.WithScopesForHost(ctx, s.t.endpoint, auth.ScopeRepository(s.t.repository, auth.ActionPull))
}

// get sends an authenticated GET for path (under /v2/<repository>/) with
// header. A transport or auth failure is classified here; any answer,
// whatever its status, is the caller's to judge (and close).
func (s *session) get(ctx context.Context, path string, header http.Header) (*http.Response, *OriginError) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v2/"+s.t.repository+path, nil)
	if err != nil {
		return nil, s.t.fail(ErrInvalidReference, 0, err.Error())
	}
	for k, vs := range header {
		req.Header[k] = append([]string(nil), vs...)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, classify(ctx, s.t, s.x, err, s.credentialSent)
	}
	return resp, nil
}

// answerFailure judges a non-success answer to the request for what (""
// for the manifest the image names, whose 404 is ErrNotFound). For content
// the image's manifests name, a 404 or another 4xx is ErrNotProven: the
// registry vouched for the image and does not serve its bytes. 401 and 403
// stay ErrDenied, 5xx, 408 and 429 ErrUnreachable.
func (s *session) answerFailure(resp *http.Response, what string) *OriginError {
	oe := fromResponse(s.t, registryAnswer(resp), s.credentialSent, false)
	if what == "" {
		return oe
	}
	detail := fmt.Sprintf("%s: the registry answered %d", what, resp.StatusCode)
	if oe.Message != "" {
		detail += " (" + oe.Message + ")"
	}
	oe.Message = detail
	if errors.Is(oe.Err, ErrNotFound) || (errors.Is(oe.Err, ErrDenied) && resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		oe.Err = ErrNotProven
	}
	return oe
}

// readAtMost reads resp's body (closing it), at most limit bytes; over
// tells whether the body holds more.
func (s *session) readAtMost(ctx context.Context, resp *http.Response, limit int64, what string) (data []byte, over bool, oe *OriginError) {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, false, s.readFailure(ctx, resp.StatusCode, what, err)
	}
	if int64(len(data)) > limit {
		return data[:limit], true, nil
	}
	return data, false, nil
}

// readFailure judges a body that could not be read whole: a deadline or a
// cancellation is ErrUnreachable, a body shorter than its Content-Length is
// ErrNotProven (a truncated answer proves nothing), anything else
// ErrUnreachable.
func (s *session) readFailure(ctx context.Context, status int, what string, err error) *OriginError {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return s.t.fail(ErrUnreachable, status, what+": no answer before the deadline")
	case ctx.Err() != nil:
		return s.t.fail(ErrUnreachable, status, what+": cancelled before the origin answered")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return s.t.fail(ErrNotProven, status, what+": the body ended before its Content-Length (truncated), which does not prove the content")
	default:
		return s.t.fail(ErrUnreachable, status, what+": "+err.Error())
	}
}

// notProven builds an ErrNotProven refusal about what.
func (s *session) notProven(status int, what, why string) *OriginError {
	return s.t.fail(ErrNotProven, status, what+": "+why)
}

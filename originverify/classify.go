package originverify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// classify turns the error of a request for t (a transport error, or one
// of oras-go's auth.Client: token service, challenge) into an OriginError
// (Message not yet scrubbed). x holds what the transport saw;
// credentialSent tells whether a credential was offered.
func classify(ctx context.Context, t target, x *exchange, err error, credentialSent bool) *OriginError {
	lastStatus := x.status()
	var (
		redirect *redirectRefusedError
		response *errcode.ErrorResponse
		urlErr   *url.Error
		netErr   net.Error
	)
	switch {
	case errors.As(err, &redirect):
		return t.fail(ErrUnreachable, 0, redirect.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return t.fail(ErrUnreachable, 0, "no answer before the deadline")
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return t.fail(ErrUnreachable, 0, "cancelled before the origin answered")
	case errors.As(err, &response):
		// auth.Client's only requests of its own are the token service's.
		return fromResponse(t, response, credentialSent, true)
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		message := "the registry asks for a user name and password and no credential for it was given"
		if credentialSent {
			message = "the registry asks for a user name and password and the credential has none"
		}
		return t.fail(ErrDenied, http.StatusUnauthorized, message)
	case errors.As(err, &urlErr):
		return t.fail(ErrUnreachable, 0, urlErr.Err.Error())
	case errors.As(err, &netErr):
		return t.fail(ErrUnreachable, 0, netErr.Error())
	case lastStatus == http.StatusUnauthorized || lastStatus == http.StatusForbidden:
		// The auth flow stopped after a refusal (a challenge the
		// credential cannot answer, an unusable realm).
		return t.fail(ErrDenied, lastStatus, err.Error())
	default:
		return t.fail(ErrUnreachable, lastStatus, "unusable answer: "+err.Error())
	}
}

// maxErrorBodyBytes bounds the error body of a registry answer read for its
// messages.
const maxErrorBodyBytes = 64 << 10

// registryAnswer reads the errors[] of a registry's non-success answer
// (closing its body) for fromResponse.
func registryAnswer(resp *http.Response) *errcode.ErrorResponse {
	defer resp.Body.Close()
	r := &errcode.ErrorResponse{Method: resp.Request.Method, URL: resp.Request.URL, StatusCode: resp.StatusCode}
	var body struct {
		Errors errcode.Errors `json:"errors"`
	}
	if raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes)); err == nil && json.Unmarshal(raw, &body) == nil {
		r.Errors = body.Errors
	}
	return r
}

// fromResponse classifies an HTTP error answer of the registry (to the
// manifest request) or of its token service, keeping the registry's
// errors[].message.
func fromResponse(t target, r *errcode.ErrorResponse, credentialSent, fromTokenService bool) *OriginError {
	var messages []string
	for _, e := range r.Errors {
		if e.Message != "" {
			messages = append(messages, e.Message)
		}
	}
	message := strings.Join(messages, "; ")
	if fromTokenService {
		host := ""
		if r.URL != nil {
			host = r.URL.Host
		}
		message = strings.TrimSuffix("token service "+host+": "+message, ": ")
	}
	status := r.StatusCode
	if message == "" && !fromTokenService && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
		message = "no credential was sent (none given, or it names another registry)"
		if credentialSent {
			message = "the credential was not accepted for this repository"
		}
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return t.fail(ErrDenied, status, message)
	case fromTokenService && status == http.StatusBadRequest:
		// OAuth2 token endpoints answer 400 (invalid_grant) to a bad
		// refresh token.
		return t.fail(ErrDenied, status, message)
	case fromTokenService:
		return t.fail(ErrUnreachable, status, message)
	case status == http.StatusNotFound:
		return t.fail(ErrNotFound, status, message)
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return t.fail(ErrUnreachable, status, message)
	case status >= 400:
		return t.fail(ErrDenied, status, message)
	default:
		return t.fail(ErrUnreachable, status, message)
	}
}

package originverify

import (
	"net/http"
	"testing"
)

// recordingTransport keeps the Authorization of each request it is given.
type recordingTransport struct{ seen []string }

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.seen = append(rt.seen, req.Header.Get("Authorization"))
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

const (
	originBlob  = "https://origin.example:5000/v2/r/blobs/sha256:1"
	originToken = "https://origin.example:5000/v2/auth"
)

func testExchange(rt http.RoundTripper) *exchange {
	return &exchange{base: rt, originScheme: "https", originHost: "origin.example:5000", blobPrefix: "/v2/r/blobs/"}
}

// redirected is a request to url made after first answered a redirect, as
// http.Client builds it.
func redirected(t *testing.T, first, to string) *http.Request {
	t.Helper()
	prev, err := http.NewRequest(http.MethodGet, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Response = &http.Response{StatusCode: http.StatusTemporaryRedirect, Request: prev}
	return req
}

// Whatever the layers above do, the transport of a verification never
// sends an Authorization header on a blob's redirect to another host, and
// keeps it for the origin and for token requests elsewhere (even when a
// token is fetched while a blob is asked for).
func TestExchangeKeepsTheCredentialAtTheOrigin(t *testing.T) {
	tests := []struct {
		name, first, to string
		wantAuth        bool
	}{
		{"blob at the origin", originBlob, "", true},
		{"blob redirected within the origin", originBlob, "https://origin.example:5000/moved", true},
		{"blob redirected to another port", originBlob, "https://origin.example:5001/x", false},
		{"blob redirected to a CDN", originBlob, "https://cdn.example/blob", false},
		{"blob redirected to plain http at the origin's host", originBlob, "http://origin.example:5000/x", false},
		{"token service elsewhere", "https://auth.example/token", "", true},
		{"token service redirected elsewhere", originToken, "https://auth.example/token", true},
	}
	for _, tc := range tests {
		rt := &recordingTransport{}
		x := testExchange(rt)
		var req *http.Request
		if tc.to == "" {
			var err error
			if req, err = http.NewRequest(http.MethodGet, tc.first, nil); err != nil {
				t.Fatal(err)
			}
		} else {
			req = redirected(t, tc.first, tc.to)
		}
		req.Header.Set("Authorization", "Basic c2VjcmV0")
		if _, err := x.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if got := rt.seen[0] != ""; got != tc.wantAuth {
			t.Errorf("%s: Authorization sent = %v, want %v", tc.name, got, tc.wantAuth)
		}
		if req.Header.Get("Authorization") == "" {
			t.Errorf("%s: the caller's request was modified", tc.name)
		}
	}
}

// checkRedirect: manifests and tokens stay at their origin, blobs may go
// to any HTTPS host without Authorization, never to plain HTTP elsewhere.
func TestCheckRedirect(t *testing.T) {
	tests := []struct {
		name, first, to string
		wantErr         bool
	}{
		{"manifest within the origin", "https://origin.example:5000/v2/r/manifests/v1", "https://origin.example:5000/moved", false},
		{"manifest elsewhere", "https://origin.example:5000/v2/r/manifests/v1", "https://cdn.example/x", true},
		{"token elsewhere", originToken, "https://cdn.example/x", true},
		{"blob of another repository elsewhere", "https://origin.example:5000/v2/other/blobs/sha256:1", "https://cdn.example/x", true},
		{"blob to an HTTPS CDN", originBlob, "https://cdn.example/x", false},
		{"blob to plain HTTP elsewhere", originBlob, "http://cdn.example/x", true},
		{"blob within the origin", originBlob, "https://origin.example:5000/moved", false},
	}
	for _, tc := range tests {
		x := testExchange(nil)
		first, err := http.NewRequest(http.MethodGet, tc.first, nil)
		if err != nil {
			t.Fatal(err)
		}
		next := redirected(t, tc.first, tc.to)
		next.Header.Set("Authorization", "Basic c2VjcmV0")
		err = x.checkRedirect(next, []*http.Request{first})
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: checkRedirect = %v, want error %v", tc.name, err, tc.wantErr)
		}
		if err == nil && !x.isOrigin(next.URL) && next.Header.Get("Authorization") != "" {
			t.Errorf("%s: Authorization kept for another host", tc.name)
		}
	}
}

package originverify

import (
	"context"
	"net/http"
	"testing"
)

// recordingTransport keeps the Authorization of each request it is given.
type recordingTransport struct{ seen []string }

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.seen = append(rt.seen, req.Header.Get("Authorization"))
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// Whatever the layers above do, the transport of a verification never
// sends an Authorization header with a blob request to another host, and
// keeps it for the origin and for manifest and token requests.
func TestExchangeKeepsTheCredentialAtTheOrigin(t *testing.T) {
	tests := []struct {
		name, url string
		blob      bool
		wantAuth  bool
	}{
		{"blob at the origin", "https://origin.example:5000/v2/r/blobs/sha256:1", true, true},
		{"blob at another port", "https://origin.example:5001/v2/r/blobs/sha256:1", true, false},
		{"blob at a CDN", "https://cdn.example/blob", true, false},
		{"blob at the origin in plain http", "http://origin.example:5000/v2/r/blobs/sha256:1", true, false},
		{"token service elsewhere", "https://auth.example/token", false, true},
	}
	for _, tc := range tests {
		rt := &recordingTransport{}
		x := &exchange{base: rt, originScheme: "https", originHost: "origin.example:5000"}
		ctx := context.Background()
		if tc.blob {
			ctx = withBlobRequest(ctx)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, tc.url, nil)
		if err != nil {
			t.Fatal(err)
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
	first, _ := http.NewRequest(http.MethodGet, "http://origin.example:5000/v2/r/blobs/sha256:1", nil)
	tests := []struct {
		name, to string
		blob     bool
		wantErr  bool
	}{
		{"manifest within the origin", "http://origin.example:5000/moved", false, false},
		{"manifest elsewhere", "https://cdn.example/x", false, true},
		{"blob to an HTTPS CDN", "https://cdn.example/x", true, false},
		{"blob to plain HTTP elsewhere", "http://cdn.example/x", true, true},
		{"blob within the origin", "http://origin.example:5000/moved", true, false},
	}
	for _, tc := range tests {
		ctx := context.Background()
		if tc.blob {
			ctx = withBlobRequest(ctx)
		}
		next, _ := http.NewRequestWithContext(ctx, http.MethodGet, tc.to, nil)
		next.Header.Set("Authorization", "Basic c2VjcmV0")
		err := checkRedirect(next, []*http.Request{first})
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: checkRedirect = %v, want error %v", tc.name, err, tc.wantErr)
		}
		if err == nil && tc.blob && tc.to[:5] == "https" && next.Header.Get("Authorization") != "" {
			t.Errorf("%s: Authorization kept for another host", tc.name)
		}
	}
}

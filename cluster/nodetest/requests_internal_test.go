package nodetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseAccessLog reads docker-registry 2.8.2 log lines as written on
// this machine: access-log lines become requests, JSON messages are skipped.
func TestParseAccessLog(t *testing.T) {
	log := `{"level":"warning","msg":"error authorizing context: basic authentication challenge for realm \"x\"","http.request.method":"GET","http.request.uri":"/v2/x/manifests/v1"}
127.0.0.1 - - [01/Dec/2026:23:09:21 +0000] "GET /v2/ HTTP/1.1" 401 87 "" "Go-http-client/1.1"
127.0.0.1 - - [01/Dec/2026:23:09:23 +0000] "PUT /v2/t/app/blobs/uploads/c2346?_state=5tF&digest=sha256:2cf2 HTTP/1.1" 201 0 "" "curl/7.88.1"
127.0.0.1 - - [01/Dec/2026:23:09:24 +0000] "HEAD /v2/t/app/manifests/v1 HTTP/1.1" 200 0 "" "containerd/1.6.20+unknown"
127.0.0.1 - - [01/Dec/2026:23:09:25 +0000] "GET /v2/t/app/blobs/sha256:2cf2 HTTP/1.1" 200 5 "" "say \"hi\""
127.0.0.1 - - [01/Dec/2026:23:09:25 +0000] "GET /v2/t/app/blobs/sha256:2cf2 HTTP/1.1" 200 5 "-" "-"
panic: Get "http://127.0.0.1:15001/v2/": dial tcp 127.0.0.1:15001: connect: connection refused
`
	want := []RegistryRequest{
		{Method: "GET", Path: "/v2/", Status: 401, UserAgent: "Go-http-client/1.1"},
		{Method: "PUT", Path: "/v2/t/app/blobs/uploads/c2346", Status: 201, UserAgent: "curl/7.88.1"},
		{Method: "HEAD", Path: "/v2/t/app/manifests/v1", Status: 200, UserAgent: "containerd/1.6.20+unknown"},
		{Method: "GET", Path: "/v2/t/app/blobs/sha256:2cf2", Status: 200, UserAgent: `say "hi"`},
		{Method: "GET", Path: "/v2/t/app/blobs/sha256:2cf2", Status: 200},
	}
	got := parseAccessLog([]byte(log))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseAccessLog (-want +got):\n%s", diff)
	}
	if !got[1].IsBlob() || got[1].IsManifest() || !got[2].IsManifest() || got[2].IsBlob() || got[0].IsBlob() || got[0].IsManifest() {
		t.Errorf("IsBlob/IsManifest misclassify %+v", got[:3])
	}
}

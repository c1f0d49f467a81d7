package originverify

import (
	"context"
	"errors"
	"net/http"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// redirectingTransport sends every request to a fake registry, keeping the
// host it was meant for in the Host header and in asked.
type redirectingTransport struct {
	to string // 127.0.0.1:PORT

	mu    sync.Mutex
	asked []string // scheme://host of each request
}

func (rt *redirectingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.asked = append(rt.asked, req.URL.Scheme+"://"+req.URL.Host)
	rt.mu.Unlock()
	out := req.Clone(req.Context())
	out.Host = req.URL.Host
	out.URL.Scheme, out.URL.Host = "http", rt.to
	resp, err := http.DefaultTransport.RoundTrip(out)
	if resp != nil {
		resp.Request = req // the answer is to the request as it was made
	}
	return resp, err
}

// Docker Hub names are asked at registry-1.docker.io over HTTPS, under
// their normalised repository, and a credential for any of Docker Hub's
// spellings is presented there.
func TestDockerHubIsAskedAtRegistry1(t *testing.T) {
	reg := newFakeRegistry(t, basicAuth)
	reg.addUser(alice, alicePass, "library/busybox", "team/app")
	busybox := reg.push("library/busybox", "latest", "busybox")
	app := reg.push("team/app", "v1", "app")
	tests := []struct {
		image, serverAddress, wantDigest, wantPath string
	}{
		{"busybox", "", busybox, "/v2/library/busybox/manifests/latest"},
		{"docker.io/library/busybox", "https://index.docker.io/v1/", busybox, "/v2/library/busybox/manifests/latest"},
		{"index.docker.io/library/busybox:latest", "docker.io", busybox, "/v2/library/busybox/manifests/latest"},
		{"team/app:v1", "registry-1.docker.io", app, "/v2/team/app/manifests/v1"},
	}
	for _, tc := range tests {
		rt := &redirectingTransport{to: reg.host()}
		before := len(reg.requests())
		auth := &imageruntime.AuthConfig{Username: alice, Password: alicePass, ServerAddress: tc.serverAddress}
		got, err := New(WithTransport(rt)).Verify(context.Background(), tc.image, auth)
		if err != nil || got != tc.wantDigest {
			t.Errorf("Verify(%q) = %q, %v; want %s", tc.image, got, err, tc.wantDigest)
			continue
		}
		for _, asked := range rt.asked {
			if asked != "https://registry-1.docker.io" {
				t.Errorf("Verify(%q) asked %s, want only https://registry-1.docker.io", tc.image, asked)
			}
		}
		for _, r := range reg.requests()[before:] {
			repoPath := strings.TrimSuffix(tc.wantPath, "/manifests/"+path.Base(tc.wantPath))
			if r.Host != "registry-1.docker.io" || (r.Path != tc.wantPath && !strings.HasPrefix(r.Path, repoPath+"/blobs/sha256:")) {
				t.Errorf("Verify(%q): the registry saw Host %s path %s, want registry-1.docker.io %s or its blobs", tc.image, r.Host, r.Path, tc.wantPath)
			}
		}
	}

	// A credential for another registry is not presented to Docker Hub.
	rt := &redirectingTransport{to: reg.host()}
	before := len(reg.requests())
	auth := &imageruntime.AuthConfig{Username: alice, Password: alicePass, ServerAddress: "quay.io"}
	if _, err := New(WithTransport(rt)).Verify(context.Background(), "busybox", auth); !errors.Is(err, ErrDenied) {
		t.Errorf("a quay.io credential reached Docker Hub: Verify = %v, want ErrDenied", err)
	}
	after := reg.requests()[before:]
	if len(after) == 0 {
		t.Fatal("Docker Hub was not asked")
	}
	for _, r := range after {
		if r.Authorization != "" {
			t.Errorf("a quay.io credential was presented to Docker Hub: %q", r.Authorization)
		}
	}
}

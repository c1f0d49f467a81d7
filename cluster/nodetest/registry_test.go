package nodetest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
)

// TestRegistryPush pushes an image to an open and to an htpasswd registry
// and reads the manifest back; without credentials the second refuses.
func TestRegistryPush(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	auth := &nodetest.BasicAuth{Username: "robot", Password: "s3cret-pw"}
	open, err := nodetest.StartRegistry(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open.Stop)
	closed, err := nodetest.StartRegistry(ctx, t.TempDir(), auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closed.Stop)

	files := map[string]nodetest.File{"bin/hello": {Data: []byte("#!/bin/true\n"), Mode: 0o755}, "etc/x": {Data: []byte("x")}}
	d1, err := nodetest.PushImage(ctx, open, "public/app:v1", files, []string{"/bin/hello"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := nodetest.PushImage(ctx, closed, closed.Host+"/tenant/app:v1", files, []string{"/bin/hello"}, auth)
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 || !strings.HasPrefix(d1, "sha256:") {
		t.Fatalf("digests %s and %s: want the same reproducible sha256 digest", d1, d2)
	}
	if _, err := nodetest.PushImage(ctx, closed, "tenant/other:v1", files, nil, nil); err == nil {
		t.Fatal("push without credentials to the htpasswd registry succeeded")
	}

	get := func(reg *nodetest.Registry, path string, a *nodetest.BasicAuth) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, reg.URL()+path, nil)
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
		if a != nil {
			req.SetBasicAuth(a.Username, a.Password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Docker-Content-Digest")
	}
	if code, dg := get(open, "/v2/public/app/manifests/v1", nil); code != 200 || dg != d1 {
		t.Fatalf("open registry: GET manifest: %d %s, want 200 %s", code, dg, d1)
	}
	if code, _ := get(closed, "/v2/tenant/app/manifests/v1", nil); code != http.StatusUnauthorized {
		t.Fatalf("htpasswd registry without credentials: %d, want 401", code)
	}
	if code, dg := get(closed, "/v2/tenant/app/manifests/v1", auth); code != 200 || dg != d2 {
		t.Fatalf("htpasswd registry with credentials: %d %s, want 200 %s", code, dg, d2)
	}
}

// TestRegistryChangePassword revokes a password: after ChangePassword the
// old one is refused and the new one reads the image pushed before, on the
// same host, with the requests served before still in the log. An open
// registry has no password to change.
func TestRegistryChangePassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old := &nodetest.BasicAuth{Username: "robot", Password: "old-pw"}
	reg, err := nodetest.StartRegistry(ctx, t.TempDir(), old)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	files := map[string]nodetest.File{"etc/x": {Data: []byte("x")}}
	digest, err := nodetest.PushImage(ctx, reg, reg.Host+"/tenant/app:v1", files, nil, old)
	if err != nil {
		t.Fatal(err)
	}
	manifest := func(a *nodetest.BasicAuth) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, reg.URL()+"/v2/tenant/app/manifests/v1", nil)
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
		req.SetBasicAuth(a.Username, a.Password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Docker-Content-Digest")
	}
	if code, _ := manifest(old); code != http.StatusOK {
		t.Fatalf("before the change, the password: %d, want 200", code)
	}
	before, err := reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	host := reg.Host

	if err := reg.ChangePassword(ctx, "new-pw"); err != nil {
		t.Fatal(err)
	}
	if reg.Host != host {
		t.Errorf("host %s after the change, was %s", reg.Host, host)
	}
	if old.Password != "old-pw" {
		t.Errorf("the BasicAuth given to StartRegistry now has password %q", old.Password)
	}
	if reg.Auth == nil || *reg.Auth != (nodetest.BasicAuth{Username: "robot", Password: "new-pw"}) {
		t.Errorf("Auth after the change: %+v, want robot with new-pw", reg.Auth)
	}
	if code, _ := manifest(old); code != http.StatusUnauthorized {
		t.Errorf("after the change, the old password: %d, want 401", code)
	}
	if code, dg := manifest(reg.Auth); code != http.StatusOK || dg != digest {
		t.Errorf("after the change, the new password: %d %s, want 200 %s", code, dg, digest)
	}
	after, err := reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) <= len(before) || after[len(before)-1] != before[len(before)-1] {
		t.Errorf("the log after the change has %d requests, %d before: want the old ones kept and the new ones added", len(after), len(before))
	}

	open, err := nodetest.StartRegistry(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open.Stop)
	if err := open.ChangePassword(ctx, "x"); err == nil {
		t.Error("ChangePassword on an open registry: no error")
	}
	reg.Stop()
	if err := reg.ChangePassword(ctx, "other"); err == nil {
		t.Error("ChangePassword on a stopped registry: no error")
	}
}

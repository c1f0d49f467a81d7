//go:build e2e

package e2e

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/originverify"
)

// TestOriginVerifyAgainstDistribution runs originverify against the real
// Distribution registry (Debian's docker-registry) behind htpasswd: the
// right credential gets the digest it pushed, by tag and by digest; a wrong
// password, no credential and a credential for another registry are
// denied; a missing tag is not found; a stopped registry is unreachable.
// An open registry holding the same image (what a mirror would serve)
// changes none of the origin's answers.
func TestOriginVerifyAgainstDistribution(t *testing.T) {
	ctx := testContext(t)
	user, pass := "tenant-a-robot", "pw-"+randomHex(10)
	origin, err := nodetest.StartRegistry(ctx, t.TempDir(), &nodetest.BasicAuth{Username: user, Password: pass})
	if err != nil {
		t.Fatalf("htpasswd registry: %v", err)
	}
	t.Cleanup(origin.Stop)
	mirror, err := nodetest.StartRegistry(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("open registry: %v", err)
	}
	t.Cleanup(mirror.Stop)

	content := "origin verify " + randomHex(4)
	files := map[string]nodetest.File{"hello.txt": {Data: []byte(content + "\n")}}
	image := origin.Host + "/tenant-a/private:v1"
	digest, err := nodetest.PushImage(ctx, origin, image, files, []string{"/hello.txt"}, &nodetest.BasicAuth{Username: user, Password: pass})
	if err != nil {
		t.Fatalf("push %s: %v", image, err)
	}
	mirrored, err := nodetest.PushImage(ctx, mirror, mirror.Host+"/tenant-a/private:v1", files, []string{"/hello.txt"}, nil)
	if err != nil || mirrored != digest {
		t.Fatalf("push to the open registry: %s, %v; want the same digest %s", mirrored, err, digest)
	}

	v := originverify.New(originverify.WithInsecureRegistries(origin.Host, mirror.Host))
	right := &imageruntime.AuthConfig{Username: user, Password: pass}
	accepted := []struct {
		name, image string
		auth        *imageruntime.AuthConfig
	}{
		{"right credential, by tag", image, right},
		{"right credential, by digest", origin.Host + "/tenant-a/private@" + digest, right},
		{"right credential, tag and digest", image + "@" + digest, right},
		{"right credential from the auth field, matching server address", image,
			&imageruntime.AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)), ServerAddress: "http://" + origin.Host + "/"}},
		{"the open registry, anonymously", mirror.Host + "/tenant-a/private:v1", nil},
	}
	for _, tc := range accepted {
		got, err := v.Verify(ctx, tc.image, tc.auth)
		if err != nil || got != digest {
			t.Errorf("%s: Verify(%s) = %q, %v; want %s", tc.name, tc.image, got, err, digest)
		}
	}

	refused := []struct {
		name, image string
		auth        *imageruntime.AuthConfig
		want        error
	}{
		{"wrong password", image, &imageruntime.AuthConfig{Username: user, Password: "wrong-" + pass}, originverify.ErrDenied},
		{"no credential", image, nil, originverify.ErrDenied},
		{"empty credential", image, &imageruntime.AuthConfig{}, originverify.ErrDenied},
		{"credential for another registry", image, &imageruntime.AuthConfig{Username: user, Password: pass, ServerAddress: mirror.Host}, originverify.ErrDenied},
		{"missing tag", origin.Host + "/tenant-a/private:v2", right, originverify.ErrNotFound},
		{"missing repository", origin.Host + "/tenant-b/private:v1", right, originverify.ErrNotFound},
	}
	for _, tc := range refused {
		got, err := v.Verify(ctx, tc.image, tc.auth)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify(%s) = %q, %v; want %v", tc.name, tc.image, got, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), origin.Host) || strings.Contains(err.Error(), pass) {
			t.Errorf("%s: error %q must name %s and never the password", tc.name, err, origin.Host)
		}
		t.Logf("%s: %v", tc.name, err)
	}

	origin.Stop()
	if _, err := v.Verify(ctx, image, right); !errors.Is(err, originverify.ErrUnreachable) {
		t.Errorf("stopped registry: Verify = %v, want ErrUnreachable", err)
	}
}

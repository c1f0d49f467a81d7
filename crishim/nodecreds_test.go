package crishim

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/imageruntime"
)

func TestNodeCredentialsFor(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte("hubuser:hub-secret"))
	c, err := ParseNodeCredentials([]byte(`{
		"auths": {
			"https://index.docker.io/v1/": {"auth": "` + basic + `"},
			"registry.example.com": {"username": "u", "password": "p"},
			"Registry.Example.com:5000": {"identitytoken": "it"},
			"https://gcr.example.org/v2/": {"registrytoken": "rt", "email": "x@example.org"},
			"empty.example.com": {}
		},
		"credsStore": "secretservice"
	}`))
	if err != nil {
		t.Fatal(err)
	}
	hub := &imageruntime.AuthConfig{Username: "hubuser", Password: "hub-secret", ServerAddress: "docker.io"}
	for _, tc := range []struct {
		image string
		want  *imageruntime.AuthConfig
	}{
		{"busybox", hub},
		{"docker.io/library/busybox:1", hub},
		{"index.docker.io/me/app", hub},
		{"registry-1.docker.io/me/app@sha256:" + strings.Repeat("a", 64), hub},
		{"registry.example.com/team/app:v1", &imageruntime.AuthConfig{Username: "u", Password: "p", ServerAddress: "registry.example.com"}},
		{"registry.example.com:5000/team/app", &imageruntime.AuthConfig{IdentityToken: "it", ServerAddress: "registry.example.com:5000"}},
		{"gcr.example.org/p/i", &imageruntime.AuthConfig{RegistryToken: "rt", ServerAddress: "gcr.example.org"}},
		{"registry.example.com:5001/team/app", nil},
		{"other.example.com/x", nil},
		{"empty.example.com/x", nil},
		{"NOT A REFERENCE", nil},
	} {
		if diff := cmp.Diff(tc.want, c.For(tc.image)); diff != "" {
			t.Errorf("For(%q) (-want +got):\n%s", tc.image, diff)
		}
	}
	var none *NodeCredentials
	if got := none.For("busybox"); got != nil {
		t.Errorf("nil NodeCredentials For = %v", got)
	}
	// For returns a copy.
	c.For("busybox").Password = "changed"
	if got := c.For("busybox").Password; got != "hub-secret" {
		t.Errorf("For's result aliases the stored credential")
	}
}

func TestNodeCredentialsErrorsHoldNoSecret(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, tc := range []struct {
		name, data, mustName string
	}{
		{"bad base64", `{"auths":{"registry.example.com":{"auth":"!!` + secret + `"}}}`, "registry.example.com"},
		{"auth without colon", `{"auths":{"registry.example.com":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(secret)) + `"}}}`, "registry.example.com"},
		{"not JSON", `{"auths":{"registry.example.com":{"password":"` + secret + `"`, "JSON"},
		{"wrong type", `{"auths":{"registry.example.com":{"password":["` + secret + `"]}}}`, "password"},
		{"no host", `{"auths":{"https://":{"password":"` + secret + `"}}}`, "https://"},
		{"conflicting aliases", `{"auths":{"docker.io":{"username":"a","password":"` + secret + `"},"index.docker.io":{"username":"b","password":"` + secret + `"}}}`, "index.docker.io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNodeCredentials([]byte(tc.data))
			if !errors.Is(err, ErrInvalidNodeCredentials) {
				t.Fatalf("ParseNodeCredentials = %v, want ErrInvalidNodeCredentials", err)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(secret))) {
				t.Errorf("error %q holds the secret", err)
			}
			if !strings.Contains(err.Error(), tc.mustName) {
				t.Errorf("error %q does not name %q", err, tc.mustName)
			}
		})
	}
	// The same credential under two names of one registry is fine.
	if _, err := ParseNodeCredentials([]byte(`{"auths":{"docker.io":{"username":"a","password":"p"},"https://index.docker.io/v1/":{"username":"a","password":"p"}}}`)); err != nil {
		t.Errorf("identical aliases: %v", err)
	}
}

func TestLoadNodeCredentials(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{"auths":{"registry.example.com":{"auth":"%%%"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadNodeCredentials(path); !errors.Is(err, ErrInvalidNodeCredentials) || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadNodeCredentials of a bad file = %v; want ErrInvalidNodeCredentials naming %s", err, path)
	}
	if _, err := LoadNodeCredentials(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("LoadNodeCredentials of a missing file = %v; want an error naming it", err)
	}
	if err := os.WriteFile(path, []byte(`{"auths":{"registry.example.com":{"username":"u","password":"p"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadNodeCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.For("registry.example.com/a/b"); got == nil || got.Username != "u" {
		t.Errorf("For after Load = %v", got)
	}
}

package pullmanager

import (
	"errors"
	"testing"

	"github.com/pullrecords/pullrecords/imageruntime"
)

func TestPolicies(t *testing.T) {
	type probe struct {
		image  string
		pulled bool
		want   bool
	}
	tests := []struct {
		name       string
		policy     VerificationPolicy
		allowlist  []string
		normalized bool
		probes     []probe
	}{
		{policy: NeverVerify, probes: []probe{{imgX, true, false}, {imgX, false, false}}},
		{policy: NeverVerifyPreloadedImages, probes: []probe{{imgX, true, true}, {imgX, false, false}}},
		{policy: AlwaysVerify, probes: []probe{{imgX, true, true}, {imgX, false, true}}},
		{name: "upstream names", policy: NeverVerifyAllowlistedImages,
			allowlist: []string{"docker.io/library/alpine", "registry.example/team/*", "quay.example/*", "busybox", "library/nginx"},
			probes: []probe{
				// The pulled-by-kubelet flag is ignored both ways.
				{"registry.example/team/app:v1", true, false},
				{"registry.example/other/app:v1", false, true},
				// As the kubelet v1.37: the raw string with tag and digest
				// cut, no normalisation.
				{"alpine", true, true},
				{"alpine:3.20", false, true},
				{"docker.io/library/alpine:3.20", false, false},
				{"docker.io/library/alpine@sha256:0123456789012345678901234567890123456789012345678901234567890123", false, false},
				{"busybox", false, false},
				{"busybox:1.36@sha256:0123456789012345678901234567890123456789012345678901234567890123", true, false},
				{"docker.io/library/busybox", false, true},
				{"library/nginx:1", false, false},
				{"nginx:1", false, true},
				{"docker.io/library/alpine-extra", false, true},
				{"quay.example/a/b/c:tag", true, false},
				{"quay.example.evil/a:tag", false, true},
				{"registry.example/team", false, true},
				// An unparsable name is matched as it is (best effort).
				{"Not/Valid:Name", false, true},
				{"quay.example/Not:Valid", false, false},
			}},
		{name: "normalised names", policy: NeverVerifyAllowlistedImages, normalized: true,
			allowlist: []string{"docker.io/library/alpine", "registry.example/team/*", "quay.example/*"},
			probes: []probe{
				{"registry.example/team/app:v1", true, false},
				{"registry.example/other/app:v1", false, true},
				// kubernetes#137629: familiar names match their normalised form.
				{"alpine", true, false},
				{"alpine:3.20", false, false},
				{"docker.io/library/alpine@sha256:0123456789012345678901234567890123456789012345678901234567890123", false, false},
				{"docker.io/library/alpine-extra", false, true},
				{"quay.example/a/b/c:tag", true, false},
				{"quay.example.evil/a:tag", false, true},
				{"registry.example/team", false, true},
				// Unparsable names are not allowlisted.
				{"Not/Valid:Name", false, true},
				{"quay.example/Not:Valid", false, true},
			}},
	}
	for _, tc := range tests {
		name := string(tc.policy)
		if tc.name != "" {
			name += "/" + tc.name
		}
		t.Run(name, func(t *testing.T) {
			var opts []PolicyOption
			if tc.normalized {
				opts = append(opts, WithNormalizedAllowlist())
			}
			p, err := NewImagePullCredentialVerificationPolicy(tc.policy, tc.allowlist, opts...)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second round is served from the match cache
				for _, pr := range tc.probes {
					if got := p.RequireCredentialVerificationForImage(pr.image, pr.pulled); got != pr.want {
						t.Errorf("Require(%q, pulled=%v) = %v, want %v", pr.image, pr.pulled, got, pr.want)
					}
				}
			}
		})
	}
}

func TestPolicyConstructorErrors(t *testing.T) {
	tests := []struct {
		name      string
		policy    VerificationPolicy
		allowlist []string
		want      error
	}{
		{"unknown", "Sometimes", nil, ErrUnknownPolicy},
		{"empty", "", nil, ErrUnknownPolicy},
		{"allowlist with preloaded", NeverVerifyPreloadedImages, []string{"docker.io/library/alpine"}, ErrAllowlistNotAllowed},
		{"allowlist with always", AlwaysVerify, []string{"docker.io/library/alpine"}, ErrAllowlistNotAllowed},
		{"bad pattern", NeverVerifyAllowlistedImages, []string{"alpine:3"}, ErrInvalidAllowlistPattern},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewImagePullCredentialVerificationPolicy(tc.policy, tc.allowlist); !errors.Is(err, tc.want) {
				t.Errorf("error = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := NewImagePullCredentialVerificationPolicy(NeverVerifyAllowlistedImages, []string{"alpine"}, WithNormalizedAllowlist()); !errors.Is(err, ErrInvalidAllowlistPattern) {
		t.Errorf("short name with WithNormalizedAllowlist: error = %v, want ErrInvalidAllowlistPattern", err)
	}
	if _, err := NewImagePullCredentialVerificationPolicy(NeverVerifyAllowlistedImages, nil); err != nil {
		t.Errorf("empty allowlist: %v", err)
	}
}

// TestValidateAllowlist includes every kind of pattern the kubelet rejects
// (getAllowlistImagePattern in pkg/kubelet/images/pullmanager/
// image_pull_policies.go): surrounding spaces, too short, a '*' other than
// a trailing "/*", a bare "/*", an unparsable name, a tag or digest.
func TestValidateAllowlist(t *testing.T) {
	valid := []string{
		"docker.io/library/alpine",
		"registry.example/team/app",
		"registry.example/*",
		"registry.example/team/*",
		"registry.example:5000/app",
		"a/*",
		// Not normalised, as the kubelet v1.37: three different patterns.
		"alpine",
		"library/alpine",
		"localhost:5000/app",
	}
	invalid := []string{
		"image.repo/pokus*/imagename",
		"image.repo/pokus*",
		"image.repo/*/imagename",
		"/*",
		"image.repo/",
		"",
		"*",
		"test.io/test/image1:tagged",
		"test.io/test/image1@sha256:0123456789012345678901234567890123456789012345678901234567890123",
		"test.io/test/image1 ",
		" test.io/test/image1",
		"registry.example/**",
		"Upper/Case",
		"alpine:3",
	}
	check := func(patterns []string, opts ...PolicyOption) error {
		_, err := NewImagePullCredentialVerificationPolicy(NeverVerifyAllowlistedImages, patterns, opts...)
		return err
	}
	for _, p := range valid {
		if err := check([]string{p}); err != nil {
			t.Errorf("allowlist %q: %v, want nil", p, err)
		}
	}
	for _, p := range invalid {
		if err := check([]string{p}); !errors.Is(err, ErrInvalidAllowlistPattern) {
			t.Errorf("allowlist %q: %v, want ErrInvalidAllowlistPattern", p, err)
		}
	}
	if err := check(append(append([]string{}, valid...), invalid...)); err == nil {
		t.Error("mixed list accepted")
	}
	// WithNormalizedAllowlist wants fully qualified names.
	for _, p := range []string{"alpine", "library/alpine", "docker.io/alpine", "alpine:3"} {
		if err := check([]string{p}, WithNormalizedAllowlist()); !errors.Is(err, ErrInvalidAllowlistPattern) {
			t.Errorf("normalized allowlist %q: %v, want ErrInvalidAllowlistPattern", p, err)
		}
	}
	if err := check([]string{"docker.io/library/alpine", "registry.example/*"}, WithNormalizedAllowlist()); err != nil {
		t.Errorf("normalized allowlist: %v", err)
	}
}

func TestNormalizeImageName(t *testing.T) {
	tests := map[string]string{
		"busybox":                       "docker.io/library/busybox",
		"busybox:1.36":                  "docker.io/library/busybox",
		"docker.io/testing/test:latest": "docker.io/testing/test",
		"repo.repo/test/test:v1":        "repo.repo/test/test",
		"localhost:5000/app@sha256:0123456789012345678901234567890123456789012345678901234567890123": "localhost:5000/app",
	}
	for in, want := range tests {
		got, err := NormalizeImageName(in)
		if err != nil || got != want {
			t.Errorf("NormalizeImageName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := NormalizeImageName("Bad:Name"); !errors.Is(err, ErrInvalidImageName) {
		t.Errorf("bad name error = %v", err)
	}
}

func TestCredentialHash(t *testing.T) {
	// SHA-256 of {"username":"user","password":"pass","email":"a@b.c"}: only
	// the set fields, in the struct's order.
	got := imageruntime.CredentialHash(imageruntime.AuthConfig{Username: "user", Password: "pass", Email: "a@b.c"})
	const want = "180d02e7fe58cbdce366329c7f1f990597a4b0c783b87fd2bebd41598d423c80"
	if got != want {
		t.Fatalf("CredentialHash = %q, want %q", got, want)
	}
	if got2 := imageruntime.CredentialHash(imageruntime.AuthConfig{Username: "user", Password: "pass", Email: "a@b.c"}); got2 != got {
		t.Error("hash not deterministic")
	}
	if imageruntime.CredentialHash(imageruntime.AuthConfig{Username: "user", Password: "other"}) == got {
		t.Error("different credentials, same hash")
	}
}

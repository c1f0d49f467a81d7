package pullmanager

import (
	"strings"
	"testing"
)

// FuzzAllowlist checks the allowlist rules against each other, in both
// modes: an accepted exact pattern is its own name (MappingKey, or
// NormalizeImageName with WithNormalizedAllowlist) and allowlists exactly
// the images with that name; an accepted wildcard pattern allowlists names
// under its prefix; nothing panics.
func FuzzAllowlist(f *testing.F) {
	for _, s := range []string{"docker.io/library/alpine", "registry.example/*", "alpine", "/*", "a/*", "image.repo/pokus*", " x", "test.io/test/image1:tagged"} {
		f.Add(s, "alpine:3", false)
		f.Add(s, "docker.io/library/alpine:3", true)
	}
	f.Fuzz(func(t *testing.T, pattern, image string, normalized bool) {
		nameOf := MappingKey
		var opts []PolicyOption
		if normalized {
			nameOf = NormalizeImageName
			opts = append(opts, WithNormalizedAllowlist())
		}
		err := validateAllowlist([]string{pattern}, normalized)
		p, perr := NewImagePullCredentialVerificationPolicy(NeverVerifyAllowlistedImages, []string{pattern}, opts...)
		if (err == nil) != (perr == nil) {
			t.Fatalf("validation of %q = %v but the constructor says %v", pattern, err, perr)
		}
		if err != nil {
			return
		}
		if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
			if name, nerr := nameOf(image); nerr == nil && strings.HasPrefix(name, prefix) && p.RequireCredentialVerificationForImage(image, true) {
				t.Fatalf("%q under wildcard %q is not allowlisted", image, pattern)
			}
			return
		}
		if name, nerr := nameOf(pattern); nerr != nil || name != pattern {
			t.Fatalf("accepted pattern %q has the name %q, %v", pattern, name, nerr)
		}
		if p.RequireCredentialVerificationForImage(pattern, false) {
			t.Fatalf("pattern %q does not allowlist itself", pattern)
		}
		if name, nerr := nameOf(image); nerr == nil && name != pattern && !p.RequireCredentialVerificationForImage(image, false) {
			t.Fatalf("%q (%q) allowlisted by unrelated pattern %q", image, name, pattern)
		}
	})
}

package pullmanager

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"
	"k8s.io/klog/v2"
)

// VerificationPolicy is the kubelet's imagePullCredentialsVerificationPolicy.
type VerificationPolicy string

// The four policies. NeverVerifyPreloadedImages is the kubelet's default.
const (
	// NeverVerify never asks a pod to prove its credentials for a present
	// image.
	NeverVerify VerificationPolicy = "NeverVerify"
	// NeverVerifyPreloadedImages verifies only images the kubelet pulled (or
	// is pulling); images that got onto the node otherwise are usable by
	// every pod.
	NeverVerifyPreloadedImages VerificationPolicy = "NeverVerifyPreloadedImages"
	// NeverVerifyAllowlistedImages verifies every image except those matching
	// the allowlist, whoever pulled them.
	NeverVerifyAllowlistedImages VerificationPolicy = "NeverVerifyAllowlistedImages"
	// AlwaysVerify verifies every image.
	AlwaysVerify VerificationPolicy = "AlwaysVerify"
)

// PolicyFunc adapts a function to ImagePullPolicyEnforcer.
type PolicyFunc func(image string, imagePulledByKubelet bool) bool

// RequireCredentialVerificationForImage calls f.
func (f PolicyFunc) RequireCredentialVerificationForImage(image string, imagePulledByKubelet bool) bool {
	return f(image, imagePulledByKubelet)
}

// NewImagePullCredentialVerificationPolicy returns the enforcer for p. An
// allowlist is only accepted with NeverVerifyAllowlistedImages (the kubelet's
// configuration validation rule) and every pattern must pass
// ValidateAllowlist. Errors match ErrUnknownPolicy, ErrAllowlistNotAllowed or
// ErrInvalidAllowlistPattern.
func NewImagePullCredentialVerificationPolicy(p VerificationPolicy, allowlist []string) (ImagePullPolicyEnforcer, error) {
	if p != NeverVerifyAllowlistedImages && len(allowlist) > 0 {
		switch p {
		case NeverVerify, NeverVerifyPreloadedImages, AlwaysVerify:
			return nil, fmt.Errorf("%w: policy %q", ErrAllowlistNotAllowed, p)
		}
	}
	switch p {
	case NeverVerify:
		return neverVerifyPolicy{}, nil
	case NeverVerifyPreloadedImages:
		return neverVerifyPreloadedPolicy{}, nil
	case AlwaysVerify:
		return alwaysVerifyPolicy{}, nil
	case NeverVerifyAllowlistedImages:
		return newAllowlistPolicy(allowlist)
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownPolicy, string(p))
	}
}

// The built-in policies. Each has a String method returning its
// VerificationPolicy name, which explanations show (see ExplainImagePull).
type (
	neverVerifyPolicy          struct{}
	neverVerifyPreloadedPolicy struct{}
	alwaysVerifyPolicy         struct{}
)

func (neverVerifyPolicy) RequireCredentialVerificationForImage(string, bool) bool { return false }
func (neverVerifyPolicy) String() string                                          { return string(NeverVerify) }

func (neverVerifyPreloadedPolicy) RequireCredentialVerificationForImage(_ string, pulledByKubelet bool) bool {
	return pulledByKubelet
}
func (neverVerifyPreloadedPolicy) String() string { return string(NeverVerifyPreloadedImages) }

func (alwaysVerifyPolicy) RequireCredentialVerificationForImage(string, bool) bool { return true }
func (alwaysVerifyPolicy) String() string                                          { return string(AlwaysVerify) }

// ValidateAllowlist checks allowlist patterns with the kubelet's rules:
//   - no leading or trailing white space;
//   - a wildcard only as a final "/*" after at least a registry host
//     ("registry.example/*", "registry.example/team/*"), and no other "*";
//   - any other pattern must be a fully qualified repository name without tag
//     or digest, exactly as distribution/reference normalises it
//     ("docker.io/library/alpine", not "alpine" nor "alpine:3").
//
// Every invalid pattern is reported; each error matches
// ErrInvalidAllowlistPattern.
func ValidateAllowlist(patterns []string) error {
	var errs []error
	for _, p := range patterns {
		if _, _, err := parseAllowlistPattern(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// parseAllowlistPattern returns the pattern's exact name or, for a wildcard
// pattern, its prefix (ending in "/").
func parseAllowlistPattern(p string) (value string, wildcard bool, err error) {
	bad := func(why string) (string, bool, error) {
		return "", false, fmt.Errorf("%w %q: %s", ErrInvalidAllowlistPattern, p, why)
	}
	if strings.TrimSpace(p) != p {
		return bad("leading or trailing white space")
	}
	if prefix, ok := strings.CutSuffix(p, "/*"); ok {
		prefix += "/"
		if len(prefix) <= 1 {
			return bad("at least a registry host name is required before /*")
		}
		if strings.Contains(prefix, "*") {
			return bad("a wildcard is only allowed as a final /* path segment")
		}
		return prefix, true, nil
	}
	if strings.Contains(p, "*") {
		return bad("a wildcard is only allowed as a final /* path segment")
	}
	named, err := reference.ParseNormalizedNamed(p)
	if err != nil {
		return bad(err.Error())
	}
	if named.Name() != p {
		return bad(fmt.Sprintf("must be a fully qualified image name without tag or digest (%q)", named.Name()))
	}
	return p, false, nil
}

// allowlistCacheSize bounds the remembered match results per policy.
const allowlistCacheSize = 1 << 14

type allowlistPolicy struct {
	exact    map[string]struct{}
	prefixes []string
	matches  *boundedCache[bool]
}

func newAllowlistPolicy(patterns []string) (*allowlistPolicy, error) {
	if err := ValidateAllowlist(patterns); err != nil {
		return nil, err
	}
	a := &allowlistPolicy{exact: make(map[string]struct{}), matches: newBoundedCache[bool](allowlistCacheSize)}
	for _, p := range patterns {
		v, wildcard, _ := parseAllowlistPattern(p)
		if wildcard {
			a.prefixes = append(a.prefixes, v)
		} else {
			a.exact[v] = struct{}{}
		}
	}
	return a, nil
}

// RequireCredentialVerificationForImage is true unless image's normalised
// name is allowlisted. Who pulled the image does not matter.
func (a *allowlistPolicy) RequireCredentialVerificationForImage(image string, _ bool) bool {
	return !a.allowed(image)
}

// String returns the policy's name, NeverVerifyAllowlistedImages.
func (a *allowlistPolicy) String() string { return string(NeverVerifyAllowlistedImages) }

// allowed matches image's normalised name (kubernetes#137629: the raw pod
// string, with tag, used to be compared) exactly, then by prefix. An image
// that does not parse is not allowlisted.
func (a *allowlistPolicy) allowed(image string) bool {
	if v, ok := a.matches.get(image); ok {
		return *v
	}
	ok := false
	name, _, err := normalizeCached(image)
	if err != nil {
		klog.Background().V(2).Info("Image name does not parse, it is not allowlisted", "image", image, "err", err)
	} else if _, exact := a.exact[name]; exact {
		ok = true
	} else {
		for _, prefix := range a.prefixes {
			if strings.HasPrefix(name, prefix) {
				ok = true
				break
			}
		}
	}
	a.matches.put(image, &ok)
	return ok
}

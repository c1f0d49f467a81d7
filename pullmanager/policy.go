package pullmanager

import (
	"errors"
	"fmt"
	"strings"

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

// PolicyOption configures NewImagePullCredentialVerificationPolicy.
type PolicyOption func(*policyOptions)

type policyOptions struct {
	normalizedNames bool
}

// WithNormalizedAllowlist (opt-in; upstream does not) validates allowlist
// patterns and matches pods' images by fully qualified repository name
// (NormalizeImageName), so the pattern "docker.io/library/alpine" matches a
// pod asking for "alpine:3" (kubernetes#137629). Patterns must then be fully
// qualified: "alpine" is refused. Without it, patterns and images are
// compared as the kubelet v1.37 compares them: the raw string with tag and
// digest cut (MappingKey), so "alpine:3" matches only the pattern "alpine".
// It changes only the allowlist policy.
func WithNormalizedAllowlist() PolicyOption {
	return func(o *policyOptions) { o.normalizedNames = true }
}

// NewImagePullCredentialVerificationPolicy returns the enforcer for p. An
// allowlist is only accepted with NeverVerifyAllowlistedImages (the kubelet's
// configuration validation rule), and its patterns must follow the kubelet's
// rules (v1.37):
//   - no leading or trailing white space;
//   - a wildcard only as a final "/*" after at least one character
//     ("registry.example/*", "registry.example/team/*"), and no other "*";
//   - any other pattern must parse as an image reference and carry neither
//     tag nor digest; it is not normalised, so "alpine",
//     "library/alpine" and "docker.io/library/alpine" are three valid and
//     different patterns.
//
// With WithNormalizedAllowlist a pattern without wildcard must also be a
// fully qualified repository name as NormalizeImageName gives it
// ("docker.io/library/alpine", not "alpine"). Every invalid pattern is
// reported. Errors match ErrUnknownPolicy, ErrAllowlistNotAllowed or
// ErrInvalidAllowlistPattern.
func NewImagePullCredentialVerificationPolicy(p VerificationPolicy, allowlist []string, opts ...PolicyOption) (ImagePullPolicyEnforcer, error) {
	var o policyOptions
	for _, opt := range opts {
		opt(&o)
	}
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
		return newAllowlistPolicy(allowlist, o.normalizedNames)
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

// validateAllowlist checks patterns with the rules
// NewImagePullCredentialVerificationPolicy states (the stricter ones of
// WithNormalizedAllowlist when normalized) and reports every invalid one;
// each error matches ErrInvalidAllowlistPattern.
func validateAllowlist(patterns []string, normalized bool) error {
	var errs []error
	for _, p := range patterns {
		if _, _, err := parseAllowlistPattern(p, normalized); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// parseAllowlistPattern returns the pattern's exact name or, for a wildcard
// pattern, its prefix (ending in "/").
func parseAllowlistPattern(p string, normalized bool) (value string, wildcard bool, err error) {
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
	if p == "" {
		return bad("empty pattern")
	}
	if strings.Contains(p, "*") {
		return bad("a wildcard is only allowed as a final /* path segment")
	}
	name, err := MappingKey(p)
	if normalized {
		name, err = NormalizeImageName(p)
	}
	if err != nil {
		return bad(err.Error())
	}
	if name != p {
		if normalized {
			return bad(fmt.Sprintf("must be a fully qualified image name without tag or digest (%q)", name))
		}
		return bad("neither tag nor digest is accepted in an allowlist pattern")
	}
	return p, false, nil
}

// allowlistCacheEntries and allowlistCacheBytes bound the remembered match
// results per policy.
const (
	allowlistCacheEntries = 1 << 14
	allowlistCacheBytes   = 2 << 20
)

type allowlistPolicy struct {
	exact    map[string]struct{}
	prefixes []string
	// nameOf gives the name an image is matched by: MappingKey, or
	// NormalizeImageName with WithNormalizedAllowlist.
	nameOf     keyFunc
	normalized bool
	matches    *nameCache[bool]
}

func newAllowlistPolicy(patterns []string, normalized bool) (*allowlistPolicy, error) {
	if err := validateAllowlist(patterns, normalized); err != nil {
		return nil, err
	}
	a := &allowlistPolicy{
		exact:      make(map[string]struct{}),
		nameOf:     upstreamKey,
		normalized: normalized,
		matches:    newNameCache[bool](allowlistCacheEntries, allowlistCacheBytes),
	}
	if normalized {
		a.nameOf = normalizeCached
	}
	for _, p := range patterns {
		v, wildcard, _ := parseAllowlistPattern(p, normalized)
		if wildcard {
			a.prefixes = append(a.prefixes, v)
		} else {
			a.exact[v] = struct{}{}
		}
	}
	return a, nil
}

// RequireCredentialVerificationForImage is true unless image is
// allowlisted. Who pulled the image does not matter.
func (a *allowlistPolicy) RequireCredentialVerificationForImage(image string, _ bool) bool {
	return !a.allowed(image)
}

// String returns the policy's name, NeverVerifyAllowlistedImages.
func (a *allowlistPolicy) String() string { return string(NeverVerifyAllowlistedImages) }

// allowed matches image's name (see WithNormalizedAllowlist) exactly, then
// by prefix. As upstream, an image string that does not parse is matched as
// it is; with WithNormalizedAllowlist it is not allowlisted.
func (a *allowlistPolicy) allowed(image string) bool {
	if len(image) <= maxCachedImage {
		if v, ok := a.matches.get(image); ok {
			return v
		}
	}
	name, _, err := a.nameOf(image)
	if err != nil {
		if a.normalized {
			klog.Background().V(2).Info("Image name does not parse, it is not allowlisted", "image", image, "err", err)
			a.remember(image, false)
			return false
		}
		name = image
	}
	ok := false
	if _, exact := a.exact[name]; exact {
		ok = true
	} else {
		for _, prefix := range a.prefixes {
			if strings.HasPrefix(name, prefix) {
				ok = true
				break
			}
		}
	}
	a.remember(image, ok)
	return ok
}

func (a *allowlistPolicy) remember(image string, ok bool) {
	if len(image) <= maxCachedImage {
		a.matches.put(image, ok, len(image))
	}
}

package imageref

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/distribution/reference"
)

// The oracles: what distribution/reference v0.6.0 (and the kubelet code
// built on it) does with s.

// upstreamTrim restates the kubelet v1.37.2 trimImageTagDigest.
func upstreamTrim(s string) (string, bool) {
	r, err := reference.Parse(s)
	if err != nil {
		return "", false
	}
	var tag, dgst string
	if t, ok := r.(reference.Tagged); ok {
		tag = t.Tag()
	}
	if d, ok := r.(reference.Digested); ok {
		dgst = d.Digest().String()
	}
	image := s
	if dgst != "" {
		var found bool
		if image, found = strings.CutSuffix(image, "@"+dgst); !found {
			return "", false
		}
	}
	if tag != "" {
		var found bool
		if image, found = strings.CutSuffix(image, ":"+tag); !found {
			return "", false
		}
	}
	return image, true
}

func upstreamValid(s string) bool {
	_, err := reference.Parse(s)
	return err == nil
}

func upstreamNormalizedName(s string) (string, bool) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", false
	}
	return named.Name(), true
}

func upstreamFamiliarName(s string) (string, bool) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", false
	}
	return reference.FamiliarName(named), true
}

// within reports whether sub lies inside s's memory.
func within(sub, s string) bool {
	if sub == "" {
		return true
	}
	b, p := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(sub)))
	return p >= b && p+uintptr(len(sub)) <= b+uintptr(len(s))
}

// compareAll checks every function against upstream for s and returns the
// disagreements.
func compareAll(t testing.TB, s string) {
	t.Helper()

	wantValid := upstreamValid(s)
	if got := Valid(s); got != wantValid {
		t.Errorf("Valid(%q) = %v, upstream %v", s, got, wantValid)
	}

	want, wantOK := upstreamTrim(s)
	got, gotOK := TrimTagDigest(s)
	if got != want || gotOK != wantOK {
		t.Errorf("TrimTagDigest(%q) = %q, %v; upstream %q, %v", s, got, gotOK, want, wantOK)
	}
	if gotOK != wantValid {
		t.Errorf("TrimTagDigest(%q) ok = %v but Parse ok = %v", s, gotOK, wantValid)
	}
	if gotOK && (!strings.HasPrefix(s, got) || !within(got, s)) {
		t.Errorf("TrimTagDigest(%q) = %q is not a prefix sharing the input's memory", s, got)
	}

	want, wantOK = upstreamNormalizedName(s)
	got, gotOK = NormalizedName(s)
	if got != want || gotOK != wantOK {
		t.Errorf("NormalizedName(%q) = %q, %v; upstream %q, %v", s, got, gotOK, want, wantOK)
	}
	prefix, rest, partsOK := NormalizedNameParts(s)
	if prefix+rest != want || partsOK != wantOK {
		t.Errorf("NormalizedNameParts(%q) = %q, %q, %v; upstream %q, %v", s, prefix, rest, partsOK, want, wantOK)
	}
	if !within(rest, s) {
		t.Errorf("NormalizedNameParts(%q) rest %q does not share the input's memory", s, rest)
	}
	if gotOK && prefix == "" && !within(got, s) {
		t.Errorf("NormalizedName(%q) = %q was allocated though no prefix was needed", s, got)
	}

	want, wantOK = upstreamFamiliarName(s)
	got, gotOK = FamiliarName(s)
	if got != want || gotOK != wantOK {
		t.Errorf("FamiliarName(%q) = %q, %v; upstream %q, %v", s, got, gotOK, want, wantOK)
	}
	if !within(got, s) {
		t.Errorf("FamiliarName(%q) = %q does not share the input's memory", s, got)
	}
}

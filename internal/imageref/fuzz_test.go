package imageref

import "testing"

// The fuzz targets start from the committed seeds under
// testdata/fuzz/<target>/ plus the hand-written corpus. Inputs longer than
// maxFuzzLen are skipped: the regexps upstream are slow on them under
// coverage instrumentation, which stalls the fuzzer for many seconds at a
// time, and TestCorpus covers long inputs (up to 100 000 bytes) already.
const maxFuzzLen = 2048

func addCorpus(f *testing.F) {
	for _, s := range corpus {
		if len(s) <= maxFuzzLen {
			f.Add(s)
		}
	}
}

// FuzzTrimTagDigest compares Valid and TrimTagDigest with reference.Parse
// and the kubelet's trimImageTagDigest.
func FuzzTrimTagDigest(f *testing.F) {
	addCorpus(f)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzLen {
			t.Skip()
		}
		if got, want := Valid(s), upstreamValid(s); got != want {
			t.Fatalf("Valid(%q) = %v, upstream %v", s, got, want)
		}
		got, ok := TrimTagDigest(s)
		want, wantOK := upstreamTrim(s)
		if got != want || ok != wantOK {
			t.Fatalf("TrimTagDigest(%q) = %q, %v; upstream %q, %v", s, got, ok, want, wantOK)
		}
		if !within(got, s) {
			t.Fatalf("TrimTagDigest(%q) = %q does not share the input's memory", s, got)
		}
	})
}

// FuzzNormalizedName compares NormalizedName and NormalizedNameParts with
// reference.ParseNormalizedNamed.
func FuzzNormalizedName(f *testing.F) {
	addCorpus(f)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzLen {
			t.Skip()
		}
		want, wantOK := upstreamNormalizedName(s)
		got, ok := NormalizedName(s)
		if got != want || ok != wantOK {
			t.Fatalf("NormalizedName(%q) = %q, %v; upstream %q, %v", s, got, ok, want, wantOK)
		}
		prefix, rest, ok := NormalizedNameParts(s)
		if prefix+rest != want || ok != wantOK || !within(rest, s) {
			t.Fatalf("NormalizedNameParts(%q) = %q, %q, %v; upstream %q, %v", s, prefix, rest, ok, want, wantOK)
		}
	})
}

// FuzzFamiliarName compares FamiliarName with reference.FamiliarName of
// reference.ParseNormalizedNamed.
func FuzzFamiliarName(f *testing.F) {
	addCorpus(f)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxFuzzLen {
			t.Skip()
		}
		want, wantOK := upstreamFamiliarName(s)
		got, ok := FamiliarName(s)
		if got != want || ok != wantOK {
			t.Fatalf("FamiliarName(%q) = %q, %v; upstream %q, %v", s, got, ok, want, wantOK)
		}
		if !within(got, s) {
			t.Fatalf("FamiliarName(%q) = %q does not share the input's memory", s, got)
		}
	})
}

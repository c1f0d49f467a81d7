package accessor

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// slowDecode decodes without the canonical fast path: what the strict
// serializer makes of data.
func slowDecode(data []byte) (Decoded, error) {
	obj, version, err := decodeObject(data)
	if err != nil {
		return Decoded{}, err
	}
	return decodedFromWire(obj, version)
}

func canonicalSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, dir := range []string{"kubelet/pulling", "kubelet/pulled", "broken"} {
		files, _ := filepath.Glob(filepath.Join("..", "testdata", dir, "*"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, b)
		}
	}
	rec := &ImagePulledRecord{
		LastUpdatedTime: metav1.NewTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)),
		ImageRef:        "sha256:abc",
		CredentialMapping: map[string]ImagePullCredentials{
			"b.example/x": {KubernetesSecrets: []ImagePullSecret{{UID: "u", Namespace: "n", Name: "s", CredentialHash: "h"}, {UID: "u2", Namespace: "n", Name: "s2"}}},
			"a.example/ü": {KubernetesServiceAccounts: []ImagePullServiceAccount{{UID: "1", Namespace: "n", Name: "sa"}}, NodePodsAccessible: true},
			"c.example/y": {},
			"d.example/z": {KubernetesSecrets: []ImagePullSecret{{UID: "u"}}, KubernetesServiceAccounts: []ImagePullServiceAccount{{UID: "2"}}},
		},
	}
	b, err := EncodePulledRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	seeds = append(seeds, b)
	b, _ = EncodePulledRecord(&ImagePulledRecord{ImageRef: "zero-time"})
	seeds = append(seeds, b)
	b, _ = EncodeIntent(&ImagePullIntent{Image: "docker.io/library/<b>&"})
	return append(seeds, b)
}

var equateEmptyDecoded = cmpopts.EquateEmpty()

// Every file the encoder writes takes the canonical path, and decodes to the
// same value as through the serializer.
func TestCanonicalDecodesEncoderOutput(t *testing.T) {
	for _, seed := range canonicalSeeds(t) {
		checkValidateAgrees(t, seed)
		slow, err := slowDecode(seed)
		if err != nil {
			continue // broken files: not the encoder's output
		}
		again, _ := Encode(slow)
		// Re-encoded in v1beta1: the canonical form of the same value.
		fast, ok := decodeCanonical(again)
		if !ok && bytes.ContainsRune(again, '\\') {
			continue // escaped strings (the encoder escapes <, > and &) take the serializer's path
		}
		if !ok {
			t.Errorf("encoder output not taken by the canonical path:\n%s", again)
			continue
		}
		want, _ := slowDecode(again)
		if diff := cmp.Diff(want, fast, equateEmptyDecoded); diff != "" {
			t.Errorf("canonical decode differs (-serializer +canonical):\n%s", diff)
		}
	}
}

// FuzzCanonicalAgreesWithSerializer: whatever the canonical path accepts,
// the strict serializer accepts too, with an equal value.
func FuzzCanonicalAgreesWithSerializer(f *testing.F) {
	for _, seed := range canonicalSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkValidateAgrees(t, data)
		fast, ok := decodeCanonical(data)
		if !ok {
			return
		}
		slow, err := slowDecode(data)
		if err != nil {
			t.Fatalf("canonical path accepted what the serializer rejects (%v):\n%q", err, data)
		}
		if diff := cmp.Diff(slow, fast, equateEmptyDecoded); diff != "" {
			t.Fatalf("values differ (-serializer +canonical):\n%s\ninput %q", diff, data)
		}
	})
}

// checkValidateAgrees checks that ValidateCanonical accepts exactly what the
// canonical decoder accepts, with the decoded kind, version and key.
func checkValidateAgrees(t *testing.T, data []byte) {
	t.Helper()
	dec, ok := decodeCanonical(data)
	f, vok := ValidateCanonical(data)
	if ok != vok {
		t.Fatalf("ValidateCanonical ok = %v, canonical decoder ok = %v for %q", vok, ok, data)
	}
	if !ok {
		return
	}
	if f.Kind != dec.Kind || f.Version != dec.Version || f.Key != dec.Key() {
		t.Fatalf("ValidateCanonical = %+v, decoder %s %s %q", f, dec.Kind, dec.Version, dec.Key())
	}
}

// Torn and altered copies of valid files: the validator and the decoder
// agree on every one.
func TestValidateCanonicalAgrees(t *testing.T) {
	for _, seed := range canonicalSeeds(t) {
		again := seed
		if d, err := slowDecode(seed); err == nil {
			again, _ = Encode(d)
		}
		for _, data := range [][]byte{seed, again} {
			for cut := range len(data) + 1 {
				checkValidateAgrees(t, data[:cut])
			}
			for i := range data {
				altered := bytes.Clone(data)
				altered[i] ^= 0x20
				checkValidateAgrees(t, altered)
			}
		}
	}
}

func BenchmarkValidateCanonical(b *testing.B) {
	data := canonicalSeeds(b)[len(canonicalSeeds(b))-3]
	if _, ok := ValidateCanonical(data); !ok {
		b.Fatalf("not canonical: %s", data)
	}
	b.ReportAllocs()
	for b.Loop() {
		ValidateCanonical(data)
	}
}

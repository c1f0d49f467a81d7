package pullmanager

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/fsstore"
)

// TestBrokenRecordFilesFailSafe stores each of the repository's broken
// kubelet files (../testdata/broken) as the record of an image that is
// present, and checks under NeverVerify (the most permissive policy): a file
// that cannot be read must never mean "no pull needed" for a reason other
// than the policy, and any read error must mean "must pull" with result
// "error". The valid file naming another key is "not found" (kubelet
// behaviour), so only the policy decides.
func TestBrokenRecordFilesFailSafe(t *testing.T) {
	src := filepath.Join("..", "testdata", "broken")
	entries, err := os.ReadDir(src)
	if err != nil || len(entries) == 0 {
		t.Fatalf("broken fixtures missing: %v", err)
	}
	const ref = "testimageref"
	sum := sha256.Sum256([]byte(ref))
	name := "sha256-" + hex.EncodeToString(sum[:])
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			pulled := filepath.Join(dir, "image_manager", "pulled")
			if err := os.MkdirAll(pulled, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pulled, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, _ := testCtx(t)
			metrics := NewMetrics()
			store := openDiskStore(t, dir, fsstore.WithoutSync())
			for _, p := range []VerificationPolicy{NeverVerify, AlwaysVerify} {
				m, err := NewImagePullManager(ctx, store, mustPolicy(t, p), nil, WithMetrics(metrics))
				if err != nil {
					t.Fatal(err)
				}
				calls := 0
				got, err := m.MustAttemptImagePull(ctx, "docker.io/testing/test:latest", ref, podCreds(&calls, nil, nil, nil))
				if err != nil {
					t.Fatalf("%s: error %v", p, err)
				}
				if _, found, readErr := store.GetImagePulledRecord(ref); readErr == nil && !found {
					// "not found": only the policy decides.
					if want := p == AlwaysVerify; got != want {
						t.Errorf("%s: record not found, got must pull %v", p, got)
					}
					continue
				}
				if !got {
					t.Errorf("%s: an unreadable record gave \"no pull needed\"", p)
				}
			}
			want := map[string]float64{ResultError: 2}
			if e.Name() == "other-key" {
				want = map[string]float64{ResultCredentialPolicyAllowed: 1, ResultMustAuthenticate: 1}
			}
			if diff := cmp.Diff(want, checkCounts(metrics)); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

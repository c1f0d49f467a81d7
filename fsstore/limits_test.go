package fsstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

// A write whose encoding is larger than what any read accepts is refused
// before the disk is touched, instead of being acknowledged and then read
// back as corrupt.
func TestOversizedWritesAreRefused(t *testing.T) {
	kubeletDir := t.TempDir()
	s := openStore(t, kubeletDir, WithoutSync())
	logger := testLogger(t)
	old := testRecord(1)
	if err := s.WriteImagePulledRecord(logger, old); err != nil {
		t.Fatal(err)
	}
	before := map[string][]string{
		IntentsDir: dirNames(t, intentsPath(kubeletDir)),
		RecordsDir: dirNames(t, recordsPath(kubeletDir)),
	}

	big := testRecord(1) // same imageRef: the old record must survive
	for name, creds := range big.CredentialMapping {
		creds.KubernetesSecrets[0].Name = strings.Repeat("n", maxFileSize)
		big.CredentialMapping[name] = creds
		break
	}
	err := s.WriteImagePulledRecord(logger, big)
	if !errors.Is(err, accessor.ErrTooLarge) {
		t.Errorf("WriteImagePulledRecord(oversized) = %v, want ErrTooLarge", err)
	}
	fresh := testRecord(2)
	fresh.ImageRef = "sha256:" + strings.Repeat("f", 64)
	fresh.CredentialMapping = big.CredentialMapping
	if err := s.WriteImagePulledRecord(logger, fresh); !errors.Is(err, accessor.ErrTooLarge) {
		t.Errorf("WriteImagePulledRecord(oversized, new key) = %v, want ErrTooLarge", err)
	}
	image := "registry.example.com/" + strings.Repeat("x", maxFileSize)
	if err := s.WriteImagePullIntent(logger, image); !errors.Is(err, accessor.ErrTooLarge) {
		t.Errorf("WriteImagePullIntent(oversized) = %v, want ErrTooLarge", err)
	}

	// Nothing was written: no new file, no temporary file, the old record
	// unchanged, the counts unchanged.
	after := map[string][]string{
		IntentsDir: dirNames(t, intentsPath(kubeletDir)),
		RecordsDir: dirNames(t, recordsPath(kubeletDir)),
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("directories changed (-before +after):\n%s", diff)
	}
	got, found, err := s.GetImagePulledRecord(old.ImageRef)
	if err != nil || !found {
		t.Fatalf("Get(old) = %v, %v", found, err)
	}
	if diff := cmp.Diff(old, got); diff != "" {
		t.Errorf("old record (-want +got):\n%s", diff)
	}
	if _, found, err := s.GetImagePulledRecord(fresh.ImageRef); found || err != nil {
		t.Errorf("Get(refused new key) = %v, %v; want not found", found, err)
	}
	if ok, err := s.ImagePullIntentExists(image); ok || err != nil {
		t.Errorf("intent of the refused write exists = %v, %v", ok, err)
	}
	if s.CountImagePulledRecords() != 1 || s.CountImagePullIntents() != 0 {
		t.Errorf("counts %d records, %d intents; want 1, 0", s.CountImagePulledRecords(), s.CountImagePullIntents())
	}
}

package accessortest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
)

// NewStoreFunc makes a fresh, empty store for one subtest.
type NewStoreFunc = func(t *testing.T) accessor.PullRecordsAccessor

// Run runs the conformance suite against stores made by newStore; each subtest
// gets a fresh, empty store.
func Run(t *testing.T, newStore func(t *testing.T) accessor.PullRecordsAccessor) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStoreFunc)
	}{
		{"IntentRoundTrip", testIntentRoundTrip},
		{"RecordRoundTrip", testRecordRoundTrip},
		{"MissingKeys", testMissingKeys},
		{"DeleteMissing", testDeleteMissing},
		{"KindsAreSeparate", testKindsAreSeparate},
		{"OverwriteReplaces", testOverwriteReplaces},
		{"StorageTime", testStorageTime},
		{"CopiesInAndOut", testCopiesInAndOut},
		{"InvalidKeys", testInvalidKeys},
		{"NilRecord", testNilRecord},
		{"ListSizes", testListSizes},
		{"OddKeys", testOddKeys},
		{"Concurrency", testConcurrency},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, func(t *testing.T) accessor.PullRecordsAccessor {
				t.Helper()
				s := newStore(t)
				if s == nil {
					t.Fatal("newStore returned a nil store")
				}
				mustBeEmpty(t, s)
				return s
			})
		})
	}
}

func testLogger(t *testing.T) klog.Logger {
	return ktesting.NewLogger(t, ktesting.NewConfig())
}

func mustBeEmpty(t *testing.T, s accessor.PullRecordsAccessor) {
	t.Helper()
	intents, err := s.ListImagePullIntents()
	if err != nil {
		t.Fatalf("New store: ListImagePullIntents: %v", err)
	}
	records, err := s.ListImagePulledRecords()
	if err != nil {
		t.Fatalf("New store: ListImagePulledRecords: %v", err)
	}
	if len(intents) != 0 || len(records) != 0 {
		t.Fatalf("New store is not empty: intents %q, records %q", IntentImages(intents), RecordRefs(records))
	}
}

// wantIntents asserts the stored intents are exactly want (any order).
func wantIntents(t *testing.T, s accessor.PullRecordsAccessor, want ...string) {
	t.Helper()
	got, err := s.ListImagePullIntents()
	if err != nil {
		t.Fatalf("ListImagePullIntents: %v", err)
	}
	want = slices.Clone(want)
	slices.Sort(want)
	if diff := cmp.Diff(want, IntentImages(got), cmpEmpty); diff != "" {
		t.Errorf("ListImagePullIntents (-want +got):\n%s", diff)
	}
	for _, image := range want {
		ok, err := s.ImagePullIntentExists(image)
		if err != nil || !ok {
			t.Errorf("ImagePullIntentExists(%s) = %v, %v; want true, nil", shortKey(image), ok, err)
		}
	}
}

// wantRecords asserts the stored records are exactly want, through both List
// and Get, and that every one comes back in storage form.
func wantRecords(t *testing.T, s accessor.PullRecordsAccessor, want ...*accessor.ImagePulledRecord) {
	t.Helper()
	got, err := s.ListImagePulledRecords()
	if err != nil {
		t.Fatalf("ListImagePulledRecords: %v", err)
	}
	wantByRef := make(map[string]*accessor.ImagePulledRecord, len(want))
	wantRefs := make([]string, 0, len(want))
	for _, r := range want {
		wantByRef[r.ImageRef] = r.ForStorage()
		wantRefs = append(wantRefs, r.ImageRef)
	}
	slices.Sort(wantRefs)
	if diff := cmp.Diff(wantRefs, RecordRefs(got), cmpEmpty); diff != "" {
		t.Fatalf("ListImagePulledRecords refs (-want +got):\n%s", diff)
	}
	for _, r := range got {
		checkStorageForm(t, r)
		if diff := DiffRecords(wantByRef[r.ImageRef], r); diff != "" {
			t.Errorf("ListImagePulledRecords: record %s (-want +got):\n%s", shortKey(r.ImageRef), diff)
		}
	}
	for _, w := range wantByRef {
		r, ok, err := s.GetImagePulledRecord(w.ImageRef)
		if err != nil || !ok {
			t.Errorf("GetImagePulledRecord(%s) = _, %v, %v; want found, nil", shortKey(w.ImageRef), ok, err)
			continue
		}
		checkStorageForm(t, r)
		if diff := DiffRecords(w, r); diff != "" {
			t.Errorf("GetImagePulledRecord(%s) (-want +got):\n%s", shortKey(w.ImageRef), diff)
		}
	}
}

func wantNoRecord(t *testing.T, s accessor.PullRecordsAccessor, imageRef string) {
	t.Helper()
	r, ok, err := s.GetImagePulledRecord(imageRef)
	if r != nil || ok || err != nil {
		t.Errorf("GetImagePulledRecord(%s) = %v, %v, %v; want nil, false, nil", shortKey(imageRef), r, ok, err)
	}
}

func wantNoIntent(t *testing.T, s accessor.PullRecordsAccessor, image string) {
	t.Helper()
	ok, err := s.ImagePullIntentExists(image)
	if ok || err != nil {
		t.Errorf("ImagePullIntentExists(%s) = %v, %v; want false, nil", shortKey(image), ok, err)
	}
}

func testIntentRoundTrip(t *testing.T, newStore NewStoreFunc) {
	s := newStore(t)
	logger := testLogger(t)
	const a, b = "docker.io/library/nginx:1.27", "registry.example.com/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

	if err := s.WriteImagePullIntent(logger, a); err != nil {
		t.Fatalf("WriteImagePullIntent(%q): %v", a, err)
	}
	wantIntents(t, s, a)
	wantNoIntent(t, s, b)

	if err := s.WriteImagePullIntent(logger, b); err != nil {
		t.Fatalf("WriteImagePullIntent(%q): %v", b, err)
	}
	wantIntents(t, s, a, b)

	if err := s.DeleteImagePullIntent(logger, a); err != nil {
		t.Fatalf("DeleteImagePullIntent(%q): %v", a, err)
	}
	wantNoIntent(t, s, a)
	wantIntents(t, s, b)

	if err := s.DeleteImagePullIntent(logger, b); err != nil {
		t.Fatalf("DeleteImagePullIntent(%q): %v", b, err)
	}
	wantNoIntent(t, s, b)
	wantIntents(t, s)
}

func testRecordRoundTrip(t *testing.T, newStore NewStoreFunc) {
	const ref = "sha256:4b0e1a6bd1ac5a3ebfe0b5d1fa0c8b4c7d11e0f4d6f9a8a1f5c2e3b7d9a0c1e2"
	tests := []struct {
		name   string
		record *accessor.ImagePulledRecord
	}{
		{"secrets and service accounts", NewRecord(ref, "docker.io/library/nginx")},
		{"several names", NewRecord(ref, "docker.io/library/nginx", "registry.example.com/mirror/nginx", "quay.io/x/y")},
		{"node accessible", NewNodeAccessibleRecord(ref, "docker.io/library/busybox")},
		{"mixed", func() *accessor.ImagePulledRecord {
			r := NewRecord(ref, "registry.example.com/private/app")
			r.CredentialMapping["docker.io/library/app"] = accessor.ImagePullCredentials{NodePodsAccessible: true}
			r.CredentialMapping["registry.example.com/sa-only/app"] = accessor.ImagePullCredentials{
				KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{
					{UID: "u1", Namespace: "a", Name: "default"},
					{UID: "u2", Namespace: "b", Name: "builder"},
				},
			}
			r.CredentialMapping["registry.example.com/many-secrets/app"] = accessor.ImagePullCredentials{
				KubernetesSecrets: []accessor.ImagePullSecret{
					{UID: "s1", Namespace: "a", Name: "one", CredentialHash: CredentialHash(ref, "1")},
					{UID: "s2", Namespace: "a", Name: "two", CredentialHash: CredentialHash(ref, "2")},
					{UID: "s3", Namespace: "b", Name: "one", CredentialHash: CredentialHash(ref, "3")},
				},
			}
			return r
		}()},
		{"empty mapping", NewRecord(ref)},
		{"nil mapping", &accessor.ImagePulledRecord{ImageRef: ref, LastUpdatedTime: accessor.StorageTime(BaseTime)}},
		{"zero time", &accessor.ImagePulledRecord{ImageRef: ref, CredentialMapping: NewRecord(ref, "a/b").CredentialMapping}},
		{"empty credentials", &accessor.ImagePulledRecord{
			ImageRef:          ref,
			LastUpdatedTime:   accessor.StorageTime(BaseTime),
			CredentialMapping: map[string]accessor.ImagePullCredentials{"docker.io/library/empty": {}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			logger := testLogger(t)
			want := tc.record.DeepCopy()
			if err := s.WriteImagePulledRecord(logger, tc.record); err != nil {
				t.Fatalf("WriteImagePulledRecord: %v", err)
			}
			wantRecords(t, s, want)

			if err := s.DeleteImagePulledRecord(logger, ref); err != nil {
				t.Fatalf("DeleteImagePulledRecord: %v", err)
			}
			wantNoRecord(t, s, ref)
			wantRecords(t, s)
		})
	}
}

func testMissingKeys(t *testing.T, newStore NewStoreFunc) {
	s := newStore(t)
	logger := testLogger(t)
	wantNoRecord(t, s, "sha256:missing")
	wantNoIntent(t, s, "docker.io/library/missing:latest")

	// Near misses of stored keys are still missing.
	if err := s.WriteImagePulledRecord(logger, NewRecord("sha256:abc", "x/y")); err != nil {
		t.Fatalf("WriteImagePulledRecord: %v", err)
	}
	if err := s.WriteImagePullIntent(logger, "x/y:1"); err != nil {
		t.Fatalf("WriteImagePullIntent: %v", err)
	}
	for _, k := range []string{"sha256:ab", "sha256:abcd", "SHA256:abc", " sha256:abc", "sha256:abc "} {
		wantNoRecord(t, s, k)
	}
	for _, k := range []string{"x/y", "x/y:1 ", "X/y:1", "x/y:10"} {
		wantNoIntent(t, s, k)
	}
}

func testDeleteMissing(t *testing.T, newStore NewStoreFunc) {
	s := newStore(t)
	logger := testLogger(t)
	if err := s.DeleteImagePullIntent(logger, "never/written:1"); err != nil {
		t.Errorf("DeleteImagePullIntent of a missing intent: %v; want nil", err)
	}
	if err := s.DeleteImagePulledRecord(logger, "sha256:neverwritten"); err != nil {
		t.Errorf("DeleteImagePulledRecord of a missing record: %v; want nil", err)
	}
	// Deleting twice is not an error either.
	if err := s.WriteImagePullIntent(logger, "a/b:1"); err != nil {
		t.Fatalf("WriteImagePullIntent: %v", err)
	}
	if err := s.WriteImagePulledRecord(logger, NewRecord("sha256:ab")); err != nil {
		t.Fatalf("WriteImagePulledRecord: %v", err)
	}
	for i := range 2 {
		if err := s.DeleteImagePullIntent(logger, "a/b:1"); err != nil {
			t.Errorf("DeleteImagePullIntent #%d: %v", i+1, err)
		}
		if err := s.DeleteImagePulledRecord(logger, "sha256:ab"); err != nil {
			t.Errorf("DeleteImagePulledRecord #%d: %v", i+1, err)
		}
	}
	wantIntents(t, s)
	wantRecords(t, s)
}

func testKindsAreSeparate(t *testing.T, newStore NewStoreFunc) {
	s := newStore(t)
	logger := testLogger(t)
	const key = "docker.io/library/shared:1"
	if err := s.WriteImagePullIntent(logger, key); err != nil {
		t.Fatalf("WriteImagePullIntent: %v", err)
	}
	wantNoRecord(t, s, key)
	wantRecords(t, s)

	rec := NewRecord(key, "docker.io/library/shared")
	if err := s.WriteImagePulledRecord(logger, rec); err != nil {
		t.Fatalf("WriteImagePulledRecord: %v", err)
	}
	wantIntents(t, s, key)
	wantRecords(t, s, rec)

	if err := s.DeleteImagePullIntent(logger, key); err != nil {
		t.Fatalf("DeleteImagePullIntent: %v", err)
	}
	wantIntents(t, s)
	wantRecords(t, s, rec)

	if err := s.WriteImagePullIntent(logger, key); err != nil {
		t.Fatalf("WriteImagePullIntent: %v", err)
	}
	if err := s.DeleteImagePulledRecord(logger, key); err != nil {
		t.Fatalf("DeleteImagePulledRecord: %v", err)
	}
	wantIntents(t, s, key)
	wantRecords(t, s)
}

func testOverwriteReplaces(t *testing.T, newStore NewStoreFunc) {
	s := newStore(t)
	logger := testLogger(t)
	const ref = "sha256:overwrite"
	first := NewRecord(ref, "a/one", "a/two")
	second := NewNodeAccessibleRecord(ref, "b/three")
	second.LastUpdatedTime = accessor.StorageTime(BaseTime.Add(time.Hour))
	if err := s.WriteImagePulledRecord(logger, first); err != nil {
		t.Fatalf("WriteImagePulledRecord(first): %v", err)
	}
	wantRecords(t, s, first)
	if err := s.WriteImagePulledRecord(logger, second); err != nil {
		t.Fatalf("WriteImagePulledRecord(second): %v", err)
	}
	wantRecords(t, s, second)

	// Shrinking to an empty mapping replaces too.
	third := NewRecord(ref)
	if err := s.WriteImagePulledRecord(logger, third); err != nil {
		t.Fatalf("WriteImagePulledRecord(third): %v", err)
	}
	wantRecords(t, s, third)

	// Rewriting an intent keeps exactly one.
	for range 3 {
		if err := s.WriteImagePullIntent(logger, "again/and:again"); err != nil {
			t.Fatalf("WriteImagePullIntent: %v", err)
		}
	}
	wantIntents(t, s, "again/and:again")
}

func testStorageTime(t *testing.T, newStore NewStoreFunc) {
	zones := []*time.Location{
		time.UTC,
		time.FixedZone("UTC+5:30", 5*3600+1800),
		time.FixedZone("UTC-8", -8*3600),
		time.Local,
	}
	for _, zone := range zones {
		t.Run(zone.String(), func(t *testing.T) {
			s := newStore(t)
			logger := testLogger(t)
			written := time.Date(2025, time.March, 9, 23, 59, 59, 987654321, zone)
			rec := NewRecord("sha256:time", "a/b")
			rec.LastUpdatedTime.Time = written
			if err := s.WriteImagePulledRecord(logger, rec); err != nil {
				t.Fatalf("WriteImagePulledRecord: %v", err)
			}
			want := accessor.StorageTime(written)
			got, ok, err := s.GetImagePulledRecord("sha256:time")
			if err != nil || !ok {
				t.Fatalf("GetImagePulledRecord = _, %v, %v; want found", ok, err)
			}
			checkStorageForm(t, got)
			if !got.LastUpdatedTime.Time.Equal(want.Time) {
				t.Errorf("LastUpdatedTime = %s; want %s", got.LastUpdatedTime.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
			}
			list, err := s.ListImagePulledRecords()
			if err != nil || len(list) != 1 {
				t.Fatalf("ListImagePulledRecords = %d records, %v; want 1, nil", len(list), err)
			}
			checkStorageForm(t, list[0])
			if !list[0].LastUpdatedTime.Time.Equal(want.Time) {
				t.Errorf("listed LastUpdatedTime = %s; want %s", list[0].LastUpdatedTime.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
			}
		})
	}
}

func testCopiesInAndOut(t *testing.T, newStore NewStoreFunc) {
	const ref = "sha256:aliasing"
	mutate := func(r *accessor.ImagePulledRecord) {
		r.LastUpdatedTime.Time = r.LastUpdatedTime.Add(time.Hour)
		for name, c := range r.CredentialMapping {
			for i := range c.KubernetesSecrets {
				c.KubernetesSecrets[i].CredentialHash = "tampered"
				c.KubernetesSecrets[i].Name = "tampered"
			}
			for i := range c.KubernetesServiceAccounts {
				c.KubernetesServiceAccounts[i].UID = "tampered"
			}
			c.NodePodsAccessible = true
			r.CredentialMapping[name] = c
		}
		r.CredentialMapping["added/after"] = accessor.ImagePullCredentials{NodePodsAccessible: true}
		delete(r.CredentialMapping, "docker.io/library/nginx")
		r.ImageRef = "sha256:tampered"
	}

	t.Run("after write", func(t *testing.T) {
		s := newStore(t)
		logger := testLogger(t)
		rec := NewRecord(ref, "docker.io/library/nginx", "quay.io/a/b")
		want := rec.DeepCopy()
		if err := s.WriteImagePulledRecord(logger, rec); err != nil {
			t.Fatalf("WriteImagePulledRecord: %v", err)
		}
		mutate(rec)
		wantRecords(t, s, want)
		wantNoRecord(t, s, "sha256:tampered")
	})
	t.Run("after get", func(t *testing.T) {
		s := newStore(t)
		logger := testLogger(t)
		rec := NewRecord(ref, "docker.io/library/nginx", "quay.io/a/b")
		if err := s.WriteImagePulledRecord(logger, rec); err != nil {
			t.Fatalf("WriteImagePulledRecord: %v", err)
		}
		got, ok, err := s.GetImagePulledRecord(ref)
		if err != nil || !ok {
			t.Fatalf("GetImagePulledRecord = _, %v, %v", ok, err)
		}
		mutate(got)
		wantRecords(t, s, rec)
	})
	t.Run("after list", func(t *testing.T) {
		s := newStore(t)
		logger := testLogger(t)
		rec := NewRecord(ref, "docker.io/library/nginx", "quay.io/a/b")
		if err := s.WriteImagePulledRecord(logger, rec); err != nil {
			t.Fatalf("WriteImagePulledRecord: %v", err)
		}
		list, err := s.ListImagePulledRecords()
		if err != nil || len(list) != 1 {
			t.Fatalf("ListImagePulledRecords = %d records, %v", len(list), err)
		}
		mutate(list[0])
		wantRecords(t, s, rec)
	})
	t.Run("listed intents", func(t *testing.T) {
		s := newStore(t)
		logger := testLogger(t)
		if err := s.WriteImagePullIntent(logger, "a/b:1"); err != nil {
			t.Fatalf("WriteImagePullIntent: %v", err)
		}
		list, err := s.ListImagePullIntents()
		if err != nil || len(list) != 1 {
			t.Fatalf("ListImagePullIntents = %d intents, %v", len(list), err)
		}
		list[0].Image = "tampered"
		wantIntents(t, s, "a/b:1")
		wantNoIntent(t, s, "tampered")
	})
}

func testInvalidKeys(t *testing.T, newStore NewStoreFunc) {
	for _, key := range []string{"", "\xff\xfe", "valid-prefix\xc3"} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			s := newStore(t)
			logger := testLogger(t)
			if err := s.WriteImagePullIntent(logger, key); !errors.Is(err, accessor.ErrInvalidKey) {
				t.Errorf("WriteImagePullIntent(%q) = %v; want ErrInvalidKey", key, err)
			}
			if err := s.WriteImagePulledRecord(logger, NewRecord(key, "a/b")); !errors.Is(err, accessor.ErrInvalidKey) {
				t.Errorf("WriteImagePulledRecord(imageRef %q) = %v; want ErrInvalidKey", key, err)
			}
			// Lookups and deletes may report "not found" or ErrInvalidKey.
			if ok, err := s.ImagePullIntentExists(key); ok || (err != nil && !errors.Is(err, accessor.ErrInvalidKey)) {
				t.Errorf("ImagePullIntentExists(%q) = %v, %v; want false and nil or ErrInvalidKey", key, ok, err)
			}
			if r, ok, err := s.GetImagePulledRecord(key); r != nil || ok || (err != nil && !errors.Is(err, accessor.ErrInvalidKey)) {
				t.Errorf("GetImagePulledRecord(%q) = %v, %v, %v; want nil, false and nil or ErrInvalidKey", key, r, ok, err)
			}
			if err := s.DeleteImagePullIntent(logger, key); err != nil && !errors.Is(err, accessor.ErrInvalidKey) {
				t.Errorf("DeleteImagePullIntent(%q) = %v; want nil or ErrInvalidKey", key, err)
			}
			if err := s.DeleteImagePulledRecord(logger, key); err != nil && !errors.Is(err, accessor.ErrInvalidKey) {
				t.Errorf("DeleteImagePulledRecord(%q) = %v; want nil or ErrInvalidKey", key, err)
			}
			wantIntents(t, s)
			wantRecords(t, s)
		})
	}
	t.Run("invalid utf-8 does not hit the valid key", func(t *testing.T) {
		// A store that replaced bad bytes would store "a\uFFFD" and find it
		// under the wrong key.
		s := newStore(t)
		logger := testLogger(t)
		if err := s.WriteImagePullIntent(logger, "a\ufffd"); err != nil {
			t.Fatalf("WriteImagePullIntent: %v", err)
		}
		if err := s.WriteImagePullIntent(logger, "a\xff"); !errors.Is(err, accessor.ErrInvalidKey) {
			t.Errorf("WriteImagePullIntent(%q) = %v; want ErrInvalidKey", "a\xff", err)
		}
		if ok, err := s.ImagePullIntentExists("a\xff"); ok {
			t.Errorf("ImagePullIntentExists(%q) = true, %v; want false", "a\xff", err)
		}
		wantIntents(t, s, "a\ufffd")
	})
}

func testNilRecord(t *testing.T, newStore NewStoreFunc) {
	s := newStore(t)
	if err := s.WriteImagePulledRecord(testLogger(t), nil); !errors.Is(err, accessor.ErrNilRecord) {
		t.Errorf("WriteImagePulledRecord(nil) = %v; want ErrNilRecord", err)
	}
	wantRecords(t, s)
}

func testListSizes(t *testing.T, newStore NewStoreFunc) {
	for _, n := range []int{0, 1, 300} {
		t.Run(fmt.Sprintf("%d items", n), func(t *testing.T) {
			s := newStore(t)
			logger := testLogger(t)
			images := make([]string, 0, n)
			records := make([]*accessor.ImagePulledRecord, 0, n)
			for i := range n {
				image := fmt.Sprintf("registry.example.com/team-%d/app:v%d", i%7, i)
				rec := NewRecord(fmt.Sprintf("sha256:%064x", i), fmt.Sprintf("registry.example.com/team-%d/app", i%7))
				if err := s.WriteImagePullIntent(logger, image); err != nil {
					t.Fatalf("WriteImagePullIntent(%q): %v", image, err)
				}
				if err := s.WriteImagePulledRecord(logger, rec); err != nil {
					t.Fatalf("WriteImagePulledRecord(%q): %v", rec.ImageRef, err)
				}
				images = append(images, image)
				records = append(records, rec)
			}
			wantIntents(t, s, images...)
			wantRecords(t, s, records...)

			// Delete every other one; the lists follow.
			var keptImages []string
			var keptRecords []*accessor.ImagePulledRecord
			for i := range n {
				if i%2 == 0 {
					keptImages = append(keptImages, images[i])
					keptRecords = append(keptRecords, records[i])
					continue
				}
				if err := s.DeleteImagePullIntent(logger, images[i]); err != nil {
					t.Fatalf("DeleteImagePullIntent: %v", err)
				}
				if err := s.DeleteImagePulledRecord(logger, records[i].ImageRef); err != nil {
					t.Fatalf("DeleteImagePulledRecord: %v", err)
				}
			}
			wantIntents(t, s, keptImages...)
			wantRecords(t, s, keptRecords...)
		})
	}
}

// oddKeys are keys that are valid but hostile to naive stores. Stores that put
// keys in paths, file names or JSON must still round-trip them.
func oddKeys() []string {
	return []string{
		"a\x00b",
		"\x00",
		"../../etc/passwd",
		"/absolute/path",
		".",
		"..",
		"sha256-0000000000000000000000000000000000000000000000000000000000000000",
		"name.tmp",
		"with space and\ttab\nnewline",
		`quote" and \backslash`,
		"<script>&amp;</script>",
		"\u2028\u2029",
		"日本語/イメージ:タグ",
		"🙂/emoji@sha256:🙂",
		"\ufeffbom",
		strings.Repeat("k", 64<<10),
	}
}

func testOddKeys(t *testing.T, newStore NewStoreFunc) {
	s := newStore(t)
	logger := testLogger(t)
	keys := oddKeys()
	var records []*accessor.ImagePulledRecord
	for i, key := range keys {
		if err := s.WriteImagePullIntent(logger, key); err != nil {
			t.Fatalf("WriteImagePullIntent(%s): %v", shortKey(key), err)
		}
		// The mapping keys are odd too.
		rec := NewRecord(key, key, fmt.Sprintf("odd/%d", i))
		if err := s.WriteImagePulledRecord(logger, rec); err != nil {
			t.Fatalf("WriteImagePulledRecord(%s): %v", shortKey(key), err)
		}
		records = append(records, rec)
	}
	wantIntents(t, s, keys...)
	wantRecords(t, s, records...)
	for _, key := range keys {
		if err := s.DeleteImagePullIntent(logger, key); err != nil {
			t.Fatalf("DeleteImagePullIntent(%s): %v", shortKey(key), err)
		}
		if err := s.DeleteImagePulledRecord(logger, key); err != nil {
			t.Fatalf("DeleteImagePulledRecord(%s): %v", shortKey(key), err)
		}
		wantNoIntent(t, s, key)
		wantNoRecord(t, s, key)
	}
	wantIntents(t, s)
	wantRecords(t, s)
}

var cmpEmpty = cmpopts.EquateEmpty()

package accessortest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pullrecords/pullrecords/accessor"
)

// BaseTime is the LastUpdatedTime of every record the helpers build. It is
// already in storage form (UTC, whole seconds).
var BaseTime = time.Date(2025, time.June, 1, 12, 0, 0, 0, time.UTC)

// NewRecord returns a record for imageRef with one mapping entry per name.
// Each entry holds one secret and one service account whose fields, including
// the credential hash, are derived from imageRef, the name and its position, so
// equal arguments always give equal records and different arguments give
// different content. With no names the mapping is empty but not nil. The
// LastUpdatedTime is BaseTime.
func NewRecord(imageRef string, names ...string) *accessor.ImagePulledRecord {
	r := &accessor.ImagePulledRecord{
		LastUpdatedTime:   accessor.StorageTime(BaseTime),
		ImageRef:          imageRef,
		CredentialMapping: make(map[string]accessor.ImagePullCredentials, len(names)),
	}
	for i, name := range names {
		r.CredentialMapping[name] = accessor.ImagePullCredentials{
			KubernetesSecrets: []accessor.ImagePullSecret{{
				UID:            "secret-uid-" + strconv.Itoa(i),
				Namespace:      "ns-" + strconv.Itoa(i),
				Name:           "pull-secret-" + strconv.Itoa(i),
				CredentialHash: CredentialHash(imageRef, name),
			}},
			KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{{
				UID:       "sa-uid-" + strconv.Itoa(i),
				Namespace: "ns-" + strconv.Itoa(i),
				Name:      "puller-" + strconv.Itoa(i),
			}},
		}
	}
	return r
}

// NewNodeAccessibleRecord returns a record for imageRef whose every name is
// usable by all pods on the node (no secrets, no service accounts).
func NewNodeAccessibleRecord(imageRef string, names ...string) *accessor.ImagePulledRecord {
	r := &accessor.ImagePulledRecord{
		LastUpdatedTime:   accessor.StorageTime(BaseTime),
		ImageRef:          imageRef,
		CredentialMapping: make(map[string]accessor.ImagePullCredentials, len(names)),
	}
	for _, name := range names {
		r.CredentialMapping[name] = accessor.ImagePullCredentials{NodePodsAccessible: true}
	}
	return r
}

// CredentialHash returns a deterministic, realistic looking (64 hex digits)
// credential hash for an imageRef and an image name. It is not a secret.
func CredentialHash(imageRef, name string) string {
	sum := sha256.Sum256([]byte(imageRef + "\x00" + name))
	return hex.EncodeToString(sum[:])
}

// DiffRecords returns a human-readable difference between two records, or ""
// when they are equal. Empty and nil maps and slices compare equal, and times
// compare as instants.
func DiffRecords(want, got *accessor.ImagePulledRecord) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}

// IntentImages returns the images of intents, sorted.
func IntentImages(intents []*accessor.ImagePullIntent) []string {
	out := make([]string, 0, len(intents))
	for _, in := range intents {
		if in == nil {
			out = append(out, "<nil intent>")
			continue
		}
		out = append(out, in.Image)
	}
	slices.Sort(out)
	return out
}

// RecordRefs returns the imageRefs of records, sorted.
func RecordRefs(records []*accessor.ImagePulledRecord) []string {
	out := make([]string, 0, len(records))
	for _, r := range records {
		if r == nil {
			out = append(out, "<nil record>")
			continue
		}
		out = append(out, r.ImageRef)
	}
	slices.Sort(out)
	return out
}

// checkStorageForm reports an error unless rec's time is in storage form.
func checkStorageForm(t interface{ Errorf(string, ...any) }, rec *accessor.ImagePulledRecord) {
	if rec == nil {
		return
	}
	tm := rec.LastUpdatedTime.Time
	if tm.Location() != time.UTC || tm.Nanosecond() != 0 {
		t.Errorf("record %s: LastUpdatedTime %s (location %q) is not in storage form (UTC, whole seconds)",
			shortKey(rec.ImageRef), tm.Format(time.RFC3339Nano), tm.Location())
	}
}

// shortKey keeps failure messages readable for huge keys.
func shortKey(k string) string {
	if len(k) <= 80 {
		return strconv.Quote(k)
	}
	return fmt.Sprintf("%q…(%d bytes)", k[:40], len(k))
}

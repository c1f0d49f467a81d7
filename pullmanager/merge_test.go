package pullmanager

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

// TestMergeCredentials covers every rule of the kubelet's merge
// (pkg/kubelet/images/pullmanager/image_pull_manager.go:
// pulledRecordMergeNewCreds, mergePullSecrets, mergePullServiceAccounts).
func TestMergeCredentials(t *testing.T) {
	now := t0.Add(time.Hour)
	s := func(uid, ns, name, hash string) accessor.ImagePullSecret { return secret(uid, ns, name, hash) }
	entry := func(c accessor.ImagePullCredentials) map[string]accessor.ImagePullCredentials {
		return map[string]accessor.ImagePullCredentials{keyX: c}
	}
	base := rec(refA, t0, entry(accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s("u1", "b", "n1", "h1")}}))
	tests := []struct {
		name        string
		in          *accessor.ImagePulledRecord
		key         string
		creds       *accessor.ImagePullCredentials
		wantChanged bool
		want        *accessor.ImagePulledRecord
	}{
		{name: "nil credentials change nothing", in: base, key: keyX, creds: nil, want: base},
		{name: "empty credentials change nothing", in: base, key: keyY, creds: &accessor.ImagePullCredentials{}, want: base},
		{name: "new key stored verbatim, unsorted", in: base, key: keyY,
			creds: &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{
				s("z", "z", "z", "1"), s("a", "a", "a", "2"), s("m", "m", "m", "3")}},
			wantChanged: true,
			want: rec(refA, now, map[string]accessor.ImagePullCredentials{
				keyX: base.CredentialMapping[keyX],
				keyY: {KubernetesSecrets: []accessor.ImagePullSecret{s("z", "z", "z", "1"), s("a", "a", "a", "2"), s("m", "m", "m", "3")}},
			})},
		{name: "node-wide entry is sticky", in: rec(refA, t0, entry(accessor.ImagePullCredentials{NodePodsAccessible: true})), key: keyX,
			creds: &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s("u", "n", "m", "h")}},
			want:  rec(refA, t0, entry(accessor.ImagePullCredentials{NodePodsAccessible: true}))},
		{name: "node-wide credentials wipe secrets and service accounts", key: keyX,
			in: rec(refA, t0, entry(accessor.ImagePullCredentials{
				KubernetesSecrets:         []accessor.ImagePullSecret{s("u1", "b", "n1", "h1")},
				KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{sa("s", "n", "m")}})),
			creds:       &accessor.ImagePullCredentials{NodePodsAccessible: true, KubernetesSecrets: []accessor.ImagePullSecret{s("x", "x", "x", "x")}},
			wantChanged: true,
			want:        rec(refA, now, entry(accessor.ImagePullCredentials{NodePodsAccessible: true}))},
		{name: "same secret, same hash: unchanged", in: base, key: keyX,
			creds: &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s("u1", "b", "n1", "h1")}},
			want:  base},
		{name: "same coordinates, new hash wins", in: base, key: keyX,
			creds:       &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s("u1", "b", "n1", "h2")}},
			wantChanged: true,
			want:        rec(refA, now, entry(accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s("u1", "b", "n1", "h2")}}))},
		{name: "new secrets merged and sorted by namespace, name, UID", in: base, key: keyX,
			creds: &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{
				s("u3", "a", "n1", "h3"), s("u0", "b", "n1", "h0"), s("u2", "b", "n0", "h2")}},
			wantChanged: true,
			want: rec(refA, now, entry(accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{
				s("u3", "a", "n1", "h3"), s("u2", "b", "n0", "h2"), s("u0", "b", "n1", "h0"), s("u1", "b", "n1", "h1")}}))},
		{name: "later duplicate in the new list wins", in: base, key: keyX,
			creds: &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{
				s("u1", "b", "n1", "old"), s("u1", "b", "n1", "newest")}},
			wantChanged: true,
			want:        rec(refA, now, entry(accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s("u1", "b", "n1", "newest")}}))},
		{name: "service accounts ignored when secrets are merged", in: base, key: keyX,
			creds: &accessor.ImagePullCredentials{
				KubernetesSecrets:         []accessor.ImagePullSecret{s("u1", "b", "n1", "h1")},
				KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{sa("s", "n", "m")}},
			want: base},
		{name: "service accounts unioned on the triple and sorted", key: keyX,
			in: rec(refA, t0, entry(accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{sa("u1", "b", "sa")}})),
			creds: &accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{
				sa("u2", "b", "sa"), sa("u1", "b", "sa"), sa("u9", "a", "z")}},
			wantChanged: true,
			want: rec(refA, now, entry(accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{
				sa("u9", "a", "z"), sa("u1", "b", "sa"), sa("u2", "b", "sa")}}))},
		{name: "known service account: unchanged", key: keyX,
			in:    rec(refA, t0, entry(accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{sa("u1", "b", "sa")}})),
			creds: &accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{sa("u1", "b", "sa")}},
			want:  rec(refA, t0, entry(accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{sa("u1", "b", "sa")}}))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.in.DeepCopy()
			got, changed := mergeCredentials(tc.in, tc.key, tc.creds, now)
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if diff := cmp.Diff(tc.want.ForStorage(), got.ForStorage()); diff != "" {
				t.Errorf("merged record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.in); diff != "" {
				t.Errorf("input record was modified (-before +after):\n%s", diff)
			}
			if !changed && got != tc.in {
				t.Error("unchanged merge should return the same record")
			}
		})
	}
}

// TestRecordImagePulled covers record creation and merging through the
// manager, and LastUpdatedTime moving only on change.
func TestRecordImagePulled(t *testing.T) {
	ctx, logger := testCtx(t)
	store := newFaultyStore()
	m, clk := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify))
	pull := func(image, ref string, creds *accessor.ImagePullCredentials) {
		t.Helper()
		if err := m.RecordPullIntent(logger, image); err != nil {
			t.Fatal(err)
		}
		m.RecordImagePulled(ctx, image, ref, creds)
	}

	// nil credentials create a record with an empty mapping.
	pull(imgX, refA, nil)
	want := rec(refA, t0, nil)
	if diff := cmp.Diff(want.ForStorage(), storedRecord(t, store, refA)); diff != "" {
		t.Fatalf("nil creds record (-want +got):\n%s", diff)
	}
	// nil and empty credentials never change an existing record.
	clk.Step(time.Minute)
	pull(imgX, refA, nil)
	pull(imgX, refA, &accessor.ImagePullCredentials{})
	if diff := cmp.Diff(want.ForStorage(), storedRecord(t, store, refA)); diff != "" {
		t.Fatalf("record changed by empty creds (-want +got):\n%s", diff)
	}
	// Empty (non-nil) credentials on a missing record create the entry as given.
	pull(imgY, "sha256:bbbb", &accessor.ImagePullCredentials{})
	if diff := cmp.Diff(rec("sha256:bbbb", t0.Add(time.Minute), map[string]accessor.ImagePullCredentials{keyY: {}}).ForStorage(),
		storedRecord(t, store, "sha256:bbbb")); diff != "" {
		t.Fatalf("empty creds record (-want +got):\n%s", diff)
	}
	// A change moves LastUpdatedTime; the same credentials again do not.
	clk.Step(time.Minute)
	s1 := secret("u1", "ns", "s1", "h1")
	pull(imgX, refA, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s1}})
	want = rec(refA, t0.Add(2*time.Minute), map[string]accessor.ImagePullCredentials{keyX: {KubernetesSecrets: []accessor.ImagePullSecret{s1}}})
	clk.Step(time.Minute)
	pull(imgX, refA, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s1}})
	if diff := cmp.Diff(want.ForStorage(), storedRecord(t, store, refA)); diff != "" {
		t.Fatalf("record (-want +got):\n%s", diff)
	}
	// Sub-second clock readings are stored at whole seconds.
	clk.Step(1500 * time.Millisecond)
	pull("registry.example/team/app@sha256:0123456789012345678901234567890123456789012345678901234567890123", refA,
		&accessor.ImagePullCredentials{NodePodsAccessible: true})
	if got := storedRecord(t, store, refA).LastUpdatedTime.Time; !got.Equal(t0.Add(3*time.Minute + time.Second)) {
		t.Errorf("LastUpdatedTime = %v, want whole seconds", got)
	}
	if left := storedIntents(t, store); len(left) != 0 {
		t.Errorf("intents left: %v", left)
	}
	// An unparsable image name keeps the intent.
	if err := m.RecordPullIntent(logger, "Bad:Name"); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(ctx, "Bad:Name", "sha256:cccc", nil)
	if !hasIntent(t, store, "Bad:Name") || storedRecord(t, store, "sha256:cccc") != nil {
		t.Error("an unparsable image name should keep the intent and write no record")
	}
}

// TestRecordImagePulledOverCorruptRecord: a record that cannot be read is
// overwritten by a fresh one (kubelet behaviour: it heals on the next pull).
func TestRecordImagePulledOverCorruptRecord(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFaultyStore()
	m, _ := newTestManager(t, store.Accessor(), mustPolicy(t, AlwaysVerify))
	putRecords(t, store, rec(refA, t0, map[string]accessor.ImagePullCredentials{keyY: {NodePodsAccessible: true}}))
	store.Corrupt(refA)
	m.RecordImagePulled(ctx, imgX, refA, &accessor.ImagePullCredentials{NodePodsAccessible: true})
	want := rec(refA, t0, map[string]accessor.ImagePullCredentials{keyX: {NodePodsAccessible: true}})
	if diff := cmp.Diff(want.ForStorage(), storedRecord(t, store, refA)); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
}

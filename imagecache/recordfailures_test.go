package imagecache

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

// errDisk is a pull record store failure injected through the fixture's
// accessortest.FaultyAccessor.
var errDisk = errors.New("disk full")

// A pull whose intent cannot be written is not made: the request fails with
// ReasonIntentFailed and is retried; a later attempt that can write the
// intent pulls. No intent is left either way.
func TestIntentWriteFailure(t *testing.T) {
	tests := []struct {
		name         string
		fail         func(f *fixture)
		wantStatus   ImageWorkStatus
		wantReason   string
		wantAttempts int
		wantPulls    int
	}{
		{name: "once, then retried", fail: func(f *fixture) { f.records.FailNth("WriteImagePullIntent", 1, errDisk) },
			wantStatus: StatusSucceeded, wantReason: ReasonPulled, wantAttempts: 2, wantPulls: 1},
		{name: "at every attempt", fail: func(f *fixture) { f.records.Fail("WriteImagePullIntent", errDisk) },
			wantStatus: StatusFailed, wantReason: ReasonIntentFailed, wantAttempts: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.fail(f)
			m := f.manager(t)
			run(t, m)
			if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/app:1"}}); err != nil {
				t.Fatal(err)
			}
			r := f.sink.wait(t).Results[0]
			if r.Status != tc.wantStatus || r.Reason != tc.wantReason || r.Attempts != tc.wantAttempts {
				t.Errorf("result = %s/%s after %d attempts (%s), want %s/%s after %d",
					r.Status, r.Reason, r.Attempts, r.Message, tc.wantStatus, tc.wantReason, tc.wantAttempts)
			}
			if r.Status == StatusFailed && !strings.Contains(r.Message, errDisk.Error()) {
				t.Errorf("message %q does not give the store's error", r.Message)
			}
			if got := len(f.images.pullCalls()); got != tc.wantPulls {
				t.Errorf("CRI pulls = %d, want %d", got, tc.wantPulls)
			}
			if got := f.records.CallCount("WriteImagePullIntent"); got != tc.wantAttempts {
				t.Errorf("intent writes = %d, want one per attempt (%d)", got, tc.wantAttempts)
			}
			if out := f.intentsLeft(t); len(out) != 0 {
				t.Errorf("intents left behind: %v", out)
			}
		})
	}
}

// A record that cannot be read does not make an image "already pulled": the
// check fails safe, the image is pulled with the cache's credentials, and
// the record is written anew.
func TestUnreadableRecordPullsToVerify(t *testing.T) {
	f := newFixture(t)
	const img = "reg/app:1"
	f.images.preload(img)
	f.images.requireAuth(img, "alice:s3cret")
	alice := accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{
		{UID: "uid-a", Namespace: "tenant-a", Name: "regcred", CredentialHash: credentialHash(aliceSecret)}}}
	f.seed(t, img, alice)
	f.records.Corrupt(imageID(img))
	m := f.manager(t)
	run(t, m)
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "tenant-a", Name: "c", Images: []string{img}, PullSecret: aliceSecret}); err != nil {
		t.Fatal(err)
	}
	if r := f.sink.wait(t).Results[0]; r.Status != StatusSucceeded || r.Reason != ReasonPulled {
		t.Errorf("result with an unreadable record = %s/%s (%s), want succeeded/%s", r.Status, r.Reason, r.Message, ReasonPulled)
	}
	if diff := cmp.Diff([]pullCall{{img, "alice"}}, f.images.pullCalls()); diff != "" {
		t.Errorf("CRI pulls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]accessor.ImagePullCredentials{"reg/app": alice}, f.mapping(t, imageID(img))); diff != "" {
		t.Errorf("record rewritten by the pull (-want +got):\n%s", diff)
	}
	// Readable again: a refresh finds the image recorded for the secret.
	if err := m.Refresh(ctx, "tenant-a", "c"); err != nil {
		t.Fatal(err)
	}
	if r := f.sink.wait(t).Results[0]; r.Status != StatusAlreadyPulled {
		t.Errorf("refresh result = %s/%s, want %s", r.Status, r.Reason, StatusAlreadyPulled)
	}
}

// A purge whose record cannot be deleted still removes the image, and
// reports the record failure (the stale record only makes pods verify).
func TestPurgeRecordDeleteFailure(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t)
	run(t, m)
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/a:1"}}); err != nil {
		t.Fatal(err)
	}
	f.sink.wait(t)
	f.records.Fail("DeleteImagePulledRecord", errDisk)
	if err := m.Delete(ctx, "ns", "c"); err != nil {
		t.Fatal(err)
	}
	r := f.sink.wait(t).Results[0]
	if r.Status != StatusFailed || r.Reason != ReasonRecordFailed || !strings.Contains(r.Message, errDisk.Error()) {
		t.Errorf("result = %s/%s (%s), want failed/%s naming the store's error", r.Status, r.Reason, r.Message, ReasonRecordFailed)
	}
	if f.images.has("reg/a:1") {
		t.Error("image not removed")
	}
	if f.mapping(t, imageID("reg/a:1")) == nil {
		t.Error("record gone although its delete failed")
	}
}

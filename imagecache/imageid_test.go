package imagecache

import (
	"context"
	"testing"

	"github.com/pullrecords/pullrecords/cri/critest"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// A pull is recorded under the image ID ImageStatus reports (the key every
// check uses), even when the runtime's pull returns a repo digest, as CRI-O
// does. Found in review: recording under the returned reference left the
// image looking preloaded (kubernetes#137024).
func TestPullRecordedUnderImageID(t *testing.T) {
	f := newFixture(t)
	f.images.AnswerPullsWithRepoDigest(true)
	m := f.manager(t)
	run(t, m)
	if err := m.Apply(context.Background(), ImageCache{Namespace: "ns", Name: "c", Images: []string{"reg/app:1"}, PullSecret: aliceSecret}); err != nil {
		t.Fatal(err)
	}
	st := f.sink.wait(t)
	if st.Counts[StatusSucceeded] != 1 {
		t.Fatalf("status = %+v", st)
	}
	if f.mapping(t, imageID("reg/app:1")) == nil {
		recs, _ := f.store.ListImagePulledRecords()
		t.Errorf("no record under the image ID; records: %+v", recs)
	}
	if f.mapping(t, "docker.io/reg/app@"+mustDigest(t, "reg/app:1")) != nil {
		t.Error("recorded under the reference the pull returned")
	}
}

// Deleting a cache keeps an image that another cache lists under another
// name of the same content: removing one name would remove the content.
// Found in review: names were compared as strings.
func TestPurgeKeepsImageListedUnderAnotherName(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t)
	run(t, m)
	ctx := context.Background()
	if err := m.Apply(ctx, ImageCache{Namespace: "ns", Name: "a", Images: []string{"busybox"}}); err != nil {
		t.Fatal(err)
	}
	f.sink.wait(t)
	// The runtime resolves both names to one image (critest canonicalises
	// them).
	if err := m.Apply(ctx, ImageCache{Namespace: "ns", Name: "b", Images: []string{"docker.io/library/busybox:latest"}}); err != nil {
		t.Fatal(err)
	}
	f.sink.wait(t)
	if err := m.Delete(ctx, "ns", "a"); err != nil {
		t.Fatal(err)
	}
	st := f.sink.wait(t)
	if len(st.Results) != 1 || st.Results[0].Reason != ReasonKeptByOther {
		t.Fatalf("delete results = %+v, want one %s", st.Results, ReasonKeptByOther)
	}
	if !f.images.has("docker.io/library/busybox:latest") {
		t.Error("the other cache's image was removed")
	}
}

func mustDigest(t *testing.T, image string) string {
	t.Helper()
	d, err := critest.Digest(image)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The real pull manager prunes purged images' records.
var _ recordPruner = (*pullmanager.PullManager)(nil)

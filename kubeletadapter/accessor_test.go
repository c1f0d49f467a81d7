package kubeletadapter_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/klog/v2/ktesting"
	upstream "k8s.io/kubernetes/pkg/kubelet/images/pullmanager"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/kubeletadapter"
	"github.com/pullrecords/pullrecords/memstore"
)

// The library's conformance suite is not run against the kubelet's own fs
// accessor through FromKubelet: that accessor fails it by design, not by
// the wrapper (checked by hand against v1.37.2): it accepts "" and invalid
// UTF-8 as keys (the suite wants accessor.ErrInvalidKey), returns its own
// error for a nil record (ErrNilRecord), and is not safe for concurrent
// writers of one key (a fixed "<name>.tmp" temp file; lists see half-renamed
// files). TestFromKubeletRecords checks what the wrapper itself does.
func TestFromKubeletRecords(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	fs, err := upstream.NewFSPullRecordsAccessor(logger, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lib := kubeletadapter.FromKubelet(fs)
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.FixedZone("X", 5*3600+1800))
	rec := &accessor.ImagePulledRecord{
		ImageRef:        "sha256:a",
		LastUpdatedTime: metav1.NewTime(at.Add(300 * time.Millisecond)),
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			"registry.example/a": {KubernetesSecrets: []accessor.ImagePullSecret{{UID: "u", Namespace: "n", Name: "s", CredentialHash: "h"}}},
		},
	}
	if err := lib.WriteImagePulledRecord(logger, rec); err != nil {
		t.Fatal(err)
	}
	if err := lib.WriteImagePullIntent(logger, "registry.example/a:1"); err != nil {
		t.Fatal(err)
	}
	want := rec.ForStorage()
	got, ok, err := lib.GetImagePulledRecord("sha256:a")
	if err != nil || !ok {
		t.Fatalf("GetImagePulledRecord = %v, %v", ok, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if got.LastUpdatedTime.Location() != time.UTC {
		t.Errorf("time in %v, want UTC", got.LastUpdatedTime.Location())
	}
	list, err := lib.ListImagePulledRecords()
	if err != nil || len(list) != 1 {
		t.Fatalf("ListImagePulledRecords = %d records, %v", len(list), err)
	}
	if diff := cmp.Diff(want, list[0]); diff != "" {
		t.Errorf("listed record (-want +got):\n%s", diff)
	}
	intents, err := lib.ListImagePullIntents()
	if err != nil || len(intents) != 1 || intents[0].Image != "registry.example/a:1" {
		t.Errorf("ListImagePullIntents = %v, %v", intents, err)
	}
	if ok, err := lib.ImagePullIntentExists("registry.example/a:1"); !ok || err != nil {
		t.Errorf("ImagePullIntentExists = %v, %v", ok, err)
	}
	if err := lib.DeleteImagePullIntent(logger, "registry.example/a:1"); err != nil {
		t.Fatal(err)
	}
	if err := lib.DeleteImagePulledRecord(logger, "sha256:a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := lib.GetImagePulledRecord("sha256:a"); ok || err != nil {
		t.Errorf("after delete: %v, %v", ok, err)
	}
	if lib.Unwrap() != fs {
		t.Error("Unwrap does not return the kubelet's accessor")
	}
}

// TestRoundTripConformance: the library's cache, presented to the kubelet
// by ToKubelet and back by FromKubelet, still passes the suite.
func TestRoundTripConformance(t *testing.T) {
	accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
		logger := ktesting.NewLogger(t, ktesting.NewConfig())
		store, err := fsstore.New(logger, t.TempDir(), fsstore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		cache, err := memstore.NewCache(logger, store)
		if err != nil {
			t.Fatal(err)
		}
		return kubeletadapter.FromKubelet(kubeletadapter.ToKubelet(cache))
	})
}

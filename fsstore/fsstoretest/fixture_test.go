package fsstoretest_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/fsstore/fsstoretest"
)

func record(i int) *accessor.ImagePulledRecord {
	return &accessor.ImagePulledRecord{
		ImageRef:        fmt.Sprintf("sha256:%064x", i+1),
		LastUpdatedTime: accessor.StorageTime(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)),
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			fmt.Sprintf("registry.example.com/app-%d", i): {NodePodsAccessible: true},
		},
	}
}

// TestWriteReadsBackThroughTheStore writes a fixture and reads it with
// fsstore, which checks names, modes and bytes as it does a kubelet's.
func TestWriteReadsBackThroughTheStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kubelet")
	f := fsstoretest.Fixture{
		Intents: []string{"registry.example.com/a:1", "registry.example.com/b:2"},
		Records: 37,
		Record:  record,
	}
	if err := f.Write(dir); err != nil {
		t.Fatal(err)
	}
	s, err := fsstore.New(klog.Background(), dir, fsstore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	intents, err := s.ListImagePullIntents()
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, in := range intents {
		images = append(images, in.Image)
	}
	if diff := cmp.Diff(f.Intents, images); diff != "" {
		t.Errorf("intents (-want +got):\n%s", diff)
	}
	for i := range f.Records {
		want := record(i)
		got, ok, err := s.GetImagePulledRecord(want.ImageRef)
		if err != nil || !ok {
			t.Fatalf("record %d: %v, %v", i, ok, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("record %d (-want +got):\n%s", i, diff)
		}
	}
	records, err := s.ListImagePulledRecords()
	if err != nil || len(records) != f.Records {
		t.Errorf("list: %d records, %v; want %d", len(records), err, f.Records)
	}
}

// TestWriteEdit plants a broken file through Edit; the store reports it.
func TestWriteEdit(t *testing.T) {
	dir := t.TempDir()
	f := fsstoretest.Fixture{
		Records: 3,
		Record:  record,
		Edit: func(i int, data []byte) []byte {
			if i == 1 {
				return bytes.Replace(data, []byte(`"kind"`), []byte(`"knid"`), 1)
			}
			return data
		},
	}
	if err := f.Write(dir); err != nil {
		t.Fatal(err)
	}
	s, err := fsstore.New(klog.Background(), dir, fsstore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.GetImagePulledRecord(record(1).ImageRef); err == nil {
		t.Error("the edited record read without an error")
	}
	if _, ok, err := s.GetImagePulledRecord(record(2).ImageRef); err != nil || !ok {
		t.Errorf("an unedited record: %v, %v", ok, err)
	}
}

func TestWriteNeedsRecord(t *testing.T) {
	if err := (fsstoretest.Fixture{Records: 1}).Write(t.TempDir()); err == nil {
		t.Error("Write with Records but no Record succeeded")
	}
}

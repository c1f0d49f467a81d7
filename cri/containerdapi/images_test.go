package containerdapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	manifestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	manifestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	nameA     = "origin.example/tenant-a/app:1"
	nameB     = "vouch.example/bob/x@" + manifestA
)

func TestImagesTarget(t *testing.T) {
	f := newFake()
	f.setImage(DefaultNamespace, nameA, manifestA)
	im := NewImages(f.serve(t), DefaultNamespace)
	tests := []struct {
		name     string
		image    string
		wantDgst string
		wantOK   bool
		wantErr  error
	}{
		{name: "present", image: nameA, wantDgst: manifestA, wantOK: true},
		{name: "absent", image: nameB},
		{name: "empty name", image: "", wantErr: ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := im.Target(context.Background(), tc.image)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Target(%q) error %v, want %v", tc.image, err, tc.wantErr)
			}
			if got != tc.wantDgst || ok != tc.wantOK {
				t.Errorf("Target(%q) = %q, %v; want %q, %v", tc.image, got, ok, tc.wantDgst, tc.wantOK)
			}
		})
	}
	if _, ok, err := NewImages(f.serve(t), "moby").Target(context.Background(), nameA); ok || err != nil {
		t.Errorf("Target in another namespace = %v, %v; want absent", ok, err)
	}
}

func TestImagesRemoveName(t *testing.T) {
	tests := []struct {
		name string
		// v16 makes the fake ignore Delete's target, as containerd 1.6.
		v16    bool
		setup  map[string]string // name -> target before the call
		remove string
		target string
		// race moves (or removes, when "") nameB between Get and Delete.
		race      *string
		wantErr   error
		wantAfter map[string]string
	}{
		{
			name:      "points to the target: removed, the other name kept",
			setup:     map[string]string{nameA: manifestA, nameB: manifestA},
			remove:    nameB,
			target:    manifestA,
			wantAfter: map[string]string{nameA: manifestA},
		},
		{
			name:      "1.6: points to the target: removed",
			v16:       true,
			setup:     map[string]string{nameA: manifestA, nameB: manifestA},
			remove:    nameB,
			target:    manifestA,
			wantAfter: map[string]string{nameA: manifestA},
		},
		{
			name:      "already gone: nil",
			setup:     map[string]string{nameA: manifestA},
			remove:    nameB,
			target:    manifestA,
			wantAfter: map[string]string{nameA: manifestA},
		},
		{
			name:      "points elsewhere: moved, untouched",
			setup:     map[string]string{nameA: manifestA, nameB: manifestB},
			remove:    nameB,
			target:    manifestA,
			wantErr:   ErrNameMoved,
			wantAfter: map[string]string{nameA: manifestA, nameB: manifestB},
		},
		{
			name:      "moved between Get and Delete (2.x guard): moved, untouched",
			setup:     map[string]string{nameA: manifestA, nameB: manifestA},
			remove:    nameB,
			target:    manifestA,
			race:      ptr(manifestB),
			wantErr:   ErrNameMoved,
			wantAfter: map[string]string{nameA: manifestA, nameB: manifestB},
		},
		{
			name:      "moved between Get and Delete on 1.6: deleted (the documented window)",
			v16:       true,
			setup:     map[string]string{nameA: manifestA, nameB: manifestA},
			remove:    nameB,
			target:    manifestA,
			race:      ptr(manifestB),
			wantAfter: map[string]string{nameA: manifestA},
		},
		{
			name:      "gone between Get and Delete: nil",
			setup:     map[string]string{nameA: manifestA, nameB: manifestA},
			remove:    nameB,
			target:    manifestA,
			race:      ptr(""),
			wantAfter: map[string]string{nameA: manifestA},
		},
		{
			name:      "empty target: refused before any call",
			setup:     map[string]string{nameB: manifestA},
			remove:    nameB,
			target:    "",
			wantErr:   ErrInvalidArgument,
			wantAfter: map[string]string{nameB: manifestA},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.v16 = tc.v16
			for name, target := range tc.setup {
				f.setImage(DefaultNamespace, name, target)
			}
			if tc.race != nil {
				f.beforeDelete = func(f *fakeContainerd) {
					f.mu.Lock()
					defer f.mu.Unlock()
					if *tc.race == "" {
						delete(f.images[DefaultNamespace], tc.remove)
					} else {
						f.setImageLocked(DefaultNamespace, tc.remove, *tc.race)
					}
				}
			}
			err := NewImages(f.serve(t), DefaultNamespace).RemoveName(context.Background(), tc.remove, tc.target)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("RemoveName(%q, %s) = %v; want %v", tc.remove, tc.target, err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.remove) {
				t.Errorf("error %q does not name %s", err, tc.remove)
			}
			after := map[string]string{}
			for name, d := range f.images[DefaultNamespace] {
				after[name] = d.Digest
			}
			if diff := cmp.Diff(tc.wantAfter, after); diff != "" {
				t.Errorf("names after RemoveName (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImagesRemoveNameNamespace removes a name in its namespace only.
func TestImagesRemoveNameNamespace(t *testing.T) {
	f := newFake()
	f.setImage(DefaultNamespace, nameB, manifestA)
	f.setImage("moby", nameB, manifestA)
	if err := NewImages(f.serve(t), "").RemoveName(context.Background(), nameB, manifestA); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.image(DefaultNamespace, nameB); ok {
		t.Errorf("%s still in %s", nameB, DefaultNamespace)
	}
	if _, ok := f.image("moby", nameB); !ok {
		t.Errorf("%s removed from another namespace", nameB)
	}
}

func ptr[T any](v T) *T { return &v }

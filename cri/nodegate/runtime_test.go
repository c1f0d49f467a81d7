package nodegate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/cri/critest"
	"github.com/pullrecords/pullrecords/crishim"
)

// fakeImages is Images over a map of name -> image, recording removals.
type fakeImages struct {
	images  map[string]*runtimeapi.Image
	removed []string
}

func (f *fakeImages) ImageStatus(_ context.Context, image string) (*runtimeapi.Image, error) {
	return f.images[image], nil
}

func (f *fakeImages) RemoveImage(_ context.Context, image string) error {
	f.removed = append(f.removed, image)
	delete(f.images, image)
	return nil
}

func TestImageStatusReportsIDAndDigests(t *testing.T) {
	f := &fakeImages{images: map[string]*runtimeapi.Image{
		"registry.test/a/app:1": {Id: "sha256:aa", RepoDigests: []string{"registry.test/a/app@sha256:dd"}},
	}}
	r := New(f, nil)
	got, ok, err := r.ImageStatus(context.Background(), "registry.test/a/app:1")
	if err != nil || !ok {
		t.Fatalf("ImageStatus = %v, %v", ok, err)
	}
	if diff := cmp.Diff(crishim.RuntimeImage{ID: "sha256:aa", RepoDigests: []string{"registry.test/a/app@sha256:dd"}}, got); diff != "" {
		t.Errorf("ImageStatus (-want +got):\n%s", diff)
	}
	if _, ok, err := r.ImageStatus(context.Background(), "registry.test/b/x:1"); ok || err != nil {
		t.Errorf("ImageStatus of an absent image = %v, %v; want not found, no error", ok, err)
	}
}

func TestRemoveNameWithoutContainerdRemovesNothing(t *testing.T) {
	f := &fakeImages{images: map[string]*runtimeapi.Image{"registry.test/b/x:1": {Id: "sha256:aa"}}}
	err := New(f, nil).RemoveName(context.Background(), "registry.test/b/x:1", "sha256:aa")
	if !errors.Is(err, ErrCannotRemoveName) {
		t.Fatalf("RemoveName = %v; want ErrCannotRemoveName", err)
	}
	if len(f.removed) != 0 {
		t.Errorf("removed %v through the CRI; want nothing (the CRI removes every name)", f.removed)
	}
}

func TestRemoveUnnamedKeepsNamedImages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		image *runtimeapi.Image
		want  []string
	}{
		{"tagged", &runtimeapi.Image{Id: "sha256:aa", RepoTags: []string{"registry.test/a/app:1"}}, nil},
		{"digest named", &runtimeapi.Image{Id: "sha256:aa", RepoDigests: []string{"registry.test/a/app@sha256:dd"}}, nil},
		{"no name left", &runtimeapi.Image{Id: "sha256:aa"}, []string{"sha256:aa"}},
		{"gone", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeImages{images: map[string]*runtimeapi.Image{}}
			if tc.image != nil {
				f.images["sha256:aa"] = tc.image
			}
			if err := New(f, nil).RemoveUnnamed(context.Background(), "sha256:aa"); err != nil {
				t.Fatalf("RemoveUnnamed: %v", err)
			}
			if diff := cmp.Diff(tc.want, f.removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromClientOverARealCRIServer(t *testing.T) {
	fake := critest.NewImageService()
	id, err := fake.AddImage("registry.test/a/app:1")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := cri.NewConn(fake.Serve(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	images := FromClient(runtimeapi.NewImageServiceClient(conn))
	ctx := context.Background()
	img, err := images.ImageStatus(ctx, "registry.test/a/app:1")
	if err != nil || img.GetId() != id {
		t.Fatalf("ImageStatus = %v, %v; want ID %s", img, err, id)
	}
	if err := images.RemoveImage(ctx, "registry.test/a/app:1"); err != nil {
		t.Fatalf("RemoveImage: %v", err)
	}
	if err := images.RemoveImage(ctx, "registry.test/a/app:1"); err != nil {
		t.Errorf("RemoveImage of an image already gone = %v; want nil", err)
	}
	if fake.Image(id) != nil {
		t.Errorf("the image is still there after RemoveImage")
	}
}

func TestOpenOverARuntimeThatIsNotContainerd(t *testing.T) {
	fake := critest.NewImageService()
	conn, err := cri.NewConn(fake.Serve(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	g, err := Open(context.Background(), conn, Options{StateDir: t.TempDir(), TTL: time.Hour})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer g.Close()
	if g.ContentStore {
		t.Errorf("ContentStore = true over a CRI-only runtime; want false")
	}
	if g.Gate == nil {
		t.Fatalf("Open returned no gate")
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no state directory", Options{TTL: time.Hour}, "no state directory"},
		{"no TTL", Options{StateDir: t.TempDir()}, "TTL 0s is not positive"},
		{"negative cap", Options{StateDir: t.TempDir(), TTL: time.Hour, MaxBlobBytes: -1}, "blob cap -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(context.Background(), nil, tc.o)
			if !errors.Is(err, errInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v; want errInvalidOptions naming %q", err, tc.want)
			}
		})
	}
}

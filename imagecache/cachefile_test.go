package imagecache_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/imagecache"
)

func TestParseCacheFileList(t *testing.T) {
	data := []byte(`
- namespace: shared
  name: public
  images: [nginx:1.27, registry.example/app@sha256:` + strings.Repeat("a", 64) + `]
  refreshInterval: 7d
- namespace: team-a
  name: warm
  forceFullCache: true
  refreshInterval: 30m
  images: [registry.example/team-a/app:1]
  pullSecret: {namespace: team-a, name: regcred, uid: uid-a, username: robot, password: s3cret, email: r@example.com}
`)
	got, err := imagecache.ParseCacheFile("caches.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	want := []imagecache.ImageCache{
		{Namespace: "shared", Name: "public", Images: []string{"nginx:1.27", "registry.example/app@sha256:" + strings.Repeat("a", 64)},
			RefreshInterval: 7 * 24 * time.Hour},
		{Namespace: "team-a", Name: "warm", Images: []string{"registry.example/team-a/app:1"}, ForceFullCache: true,
			RefreshInterval: 30 * time.Minute,
			PullSecret: &imagecache.PullSecret{Namespace: "team-a", Name: "regcred", UID: "uid-a",
				Username: "robot", Password: "s3cret", Email: "r@example.com"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseCacheFile (-want +got):\n%s", diff)
	}
}

func TestParseCacheFileSingleJSON(t *testing.T) {
	got, err := imagecache.ParseCacheFile("c.json", []byte(`{"namespace":"ops","name":"tools","images":["busybox:1.37"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []imagecache.ImageCache{{Namespace: "ops", Name: "tools", Images: []string{"busybox:1.37"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A file with one bad cache yields no cache at all, private ones included:
// a caller can never apply half of a file.
func TestParseCacheFileAllOrNothing(t *testing.T) {
	data := []byte(`
- namespace: team-a
  name: warm
  images: [registry.example/team-a/app:1]
  pullSecret: {namespace: team-a, name: regcred, uid: uid-a, username: robot, password: s3cret}
- namespace: team-b
  name: warm
  images: [registry.example/team-b/app:1]
  pullSecret: {namespace: team-b, name: regcred, username: robot, password: 12345}
`)
	got, err := imagecache.ParseCacheFile("caches.yaml", data)
	if got != nil {
		t.Errorf("got %d caches from an invalid file, want none", len(got))
	}
	var fe *imagecache.CacheFileError
	if !errors.As(err, &fe) || !errors.Is(err, imagecache.ErrInvalidCacheFile) {
		t.Fatalf("err = %v, want a *CacheFileError matching ErrInvalidCacheFile", err)
	}
	want := []string{
		"cache 2 (team-b/warm): pullSecret.uid: required (the secret's metadata.uid, which the kubelet records: " +
			"kubectl get secret NAME -n NAMESPACE -o jsonpath='{.metadata.uid}')",
		"cache 2 (team-b/warm): pullSecret.password: want a string",
	}
	if fe.File != "caches.yaml" || !cmp.Equal(fe.Problems, want) {
		t.Errorf("got file %q problems %q, want caches.yaml and %q", fe.File, fe.Problems, want)
	}
	if strings.Contains(err.Error(), "12345") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows a credential: %v", err)
	}
}

func TestParseCacheFileProblems(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"empty", ``, "e: no image caches; nothing applied"},
		{"empty list", `[]`, "e: no image caches; nothing applied"},
		{"scalar", `42`, `e: want a list of image caches ("- namespace: ..."), got 42; nothing applied`},
		{"not yaml", "- a: [", "e: not YAML or JSON: "},
		{"unknown field", `{namespace: a, name: b, images: [x], imagez: [y]}`,
			`e: cache 1 (a/b): unknown field "imagez" (known: namespace, name, images, refreshInterval, forceFullCache, pullSecret); nothing applied`},
		{"twice", "- {namespace: a, name: b, images: [app1]}\n- {namespace: a, name: b, images: [app2]}",
			"e: cache 2 (a/b): the same namespace and name as cache 1; list each cache once; nothing applied"},
		{"same image", `{namespace: a, name: b, images: [nginx, docker.io/library/nginx:latest]}`,
			`e: cache 1 (a/b): images[1] "docker.io/library/nginx:latest": the same image as images[0]; list each image once; nothing applied`},
		{"bad interval", `{namespace: a, name: b, images: [x], refreshInterval: -1h}`,
			`e: cache 1 (a/b): refreshInterval "-1h": want a duration such as 30m, 24h or 7d; nothing applied`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := imagecache.ParseCacheFile("e", []byte(tc.data))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, imagecache.ErrInvalidCacheFile) {
				t.Errorf("err = %q, want it to start with %q and match ErrInvalidCacheFile", err, tc.want)
			}
		})
	}
}

func TestParseCacheFileBoundsProblems(t *testing.T) {
	var b strings.Builder
	for range 30 {
		b.WriteString("- just a string\n")
	}
	_, err := imagecache.ParseCacheFile("many", []byte(b.String()))
	var fe *imagecache.CacheFileError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
	if len(fe.Problems) != 21 || fe.Problems[20] != "more problems not shown" {
		t.Errorf("got %d problems ending %q, want 20 and a last line saying more were not shown", len(fe.Problems), fe.Problems[len(fe.Problems)-1])
	}
	if err.Error() != "many: 21 problems (listed above); nothing applied" {
		t.Errorf("err = %q", err)
	}
}

func TestReadCacheFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "caches.yaml")
	if err := os.WriteFile(good, []byte("{namespace: a, name: b, images: [x]}"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := imagecache.ReadCacheFile(good)
	if err != nil || len(got) != 1 || got[0].Ref().String() != "a/b" {
		t.Fatalf("ReadCacheFile = %v, %v; want cache a/b", got, err)
	}

	if _, err := imagecache.ReadCacheFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, fs.ErrNotExist) ||
		!strings.HasPrefix(err.Error(), "cache file "+filepath.Join(dir, "missing.yaml")+": ") {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist naming the file", err)
	}

	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if got, err := imagecache.ReadCacheFile(link); err == nil || got != nil {
		t.Errorf("symbolic link: got %v, %v; want it refused", got, err)
	}
	if got, err := imagecache.ReadCacheFile(dir); err == nil || got != nil {
		t.Errorf("directory: got %v, %v; want it refused", got, err)
	}

	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, imagecache.MaxCacheFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = imagecache.ReadCacheFile(big)
	if !errors.Is(err, imagecache.ErrInvalidCacheFile) || err.Error() != big+": larger than 4 MiB; refusing to read it; nothing applied" {
		t.Errorf("big file: err = %v", err)
	}
}

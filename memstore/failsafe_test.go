package memstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// plant makes path a non-regular entry: a directory, a FIFO or a socket.
func plant(t *testing.T, kind, path string) {
	t.Helper()
	var err error
	switch kind {
	case "directory":
		err = os.Mkdir(path, 0o700)
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "socket":
		err = syscall.Mknod(path, syscall.S_IFSOCK|0o600, 0)
	case "symlink":
		err = os.Symlink(".", path)
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A non-regular entry under a record name must never let the cache answer
// "absent". If the file store's lists skipped it, the cache would turn
// authoritative at start-up and, under NeverVerifyPreloadedImages, a pod
// without credentials would be told it may use an image the node pulled
// with someone else's secret. End to end: file store, cache, manager.
func TestNonRegularEntryBehindCacheFailsSafe(t *testing.T) {
	const (
		image    = "registry.example.com/team/private:v1"
		imageRef = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	)
	noCreds := pullmanager.GetPodCredentials(func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return nil, nil, nil
	})
	for _, kind := range []string{"directory", "fifo", "socket", "symlink"} {
		for _, where := range []string{fsstore.RecordsDir, fsstore.IntentsDir} {
			for _, mode := range storeModes {
				t.Run(kind+" in "+where+"/"+mode.name, func(t *testing.T) {
					logger, ctx := ktesting.NewTestContext(t)
					dir := t.TempDir()
					// Create the directories, then plant the entry as an
					// attacker or a confused tool would, behind the store.
					s, err := fsstore.New(logger, dir, fsstore.WithoutSync())
					if err != nil {
						t.Fatal(err)
					}
					s.Close()
					key := imageRef
					if where == fsstore.IntentsDir {
						key = image
					}
					plant(t, kind, filepath.Join(dir, fsstore.DirName, where, fsstore.FileName(key)))

					store := openFSMode(t, logger, dir, mode.opts...)
					cache, err := memstore.NewCache(logger, store)
					if err != nil {
						t.Fatal(err)
					}
					if cache.Authoritative() {
						t.Error("the cache is authoritative over a store with a non-regular record entry")
					}
					// The key reads through to the store and gets its error.
					if where == fsstore.RecordsDir {
						if _, found, err := cache.GetImagePulledRecord(imageRef); !found || !errors.Is(err, fsstore.ErrNotRegular) {
							t.Errorf("cache Get = %v, %v; want found with ErrNotRegular", found, err)
						}
						if _, found, err := cache.PeekImagePulledRecord(imageRef); !found || !errors.Is(err, fsstore.ErrNotRegular) {
							t.Errorf("cache Peek = %v, %v; want found with ErrNotRegular", found, err)
						}
					} else {
						if ok, err := cache.ImagePullIntentExists(image); !errors.Is(err, fsstore.ErrNotRegular) {
							t.Errorf("cache ImagePullIntentExists = %v, %v; want ErrNotRegular", ok, err)
						}
					}

					policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
					if err != nil {
						t.Fatal(err)
					}
					m, err := pullmanager.NewImagePullManager(ctx, cache, policy, nil)
					if err != nil {
						t.Fatal(err)
					}
					for range 2 { // a failed read is not cached
						mustPull, err := m.MustAttemptImagePull(context.WithoutCancel(ctx), image, imageRef, noCreds)
						if err != nil {
							t.Errorf("MustAttemptImagePull error %v", err)
						}
						if !mustPull {
							t.Error("MustAttemptImagePull = false: a pod without credentials may use the image; want true (fail safe)")
						}
					}
				})
			}
		}
	}
}

// storeModes are the ways a process opens the kubelet's directory: the
// kubelet's own (writable), a second process beside it (read-only), and a
// point reader that skips the open-time scan (read-only, WithoutScan).
var storeModes = []struct {
	name string
	opts []fsstore.Option
}{
	{"writable", nil},
	{"readOnly", []fsstore.Option{fsstore.WithReadOnly()}},
	{"readOnlyWithoutScan", []fsstore.Option{fsstore.WithReadOnly(), fsstore.WithoutScan()}},
}

func openFSMode(t testing.TB, logger klog.Logger, dir string, opts ...fsstore.Option) *fsstore.Store {
	t.Helper()
	s, err := fsstore.New(logger, dir, append([]fsstore.Option{fsstore.WithoutSync()}, opts...)...)
	if err != nil {
		t.Fatalf("fsstore.New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// In every open mode, a record that maps the image to another tenant's
// secret makes a pod without that secret pull, through the cache, also
// after the cache has served the record once, and a pod with it may use it.
func TestOtherTenantsRecordFailsSafeInEveryMode(t *testing.T) {
	const (
		image    = "registry.example.com/team-a/private:v1"
		imageRef = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	secret := accessor.ImagePullSecret{UID: "uid-a", Namespace: "team-a", Name: "regcred", CredentialHash: "hash-a"}
	creds := func(secrets ...accessor.ImagePullSecret) pullmanager.GetPodCredentials {
		return func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
			return secrets, nil, nil
		}
	}
	for _, mode := range storeModes {
		t.Run(mode.name, func(t *testing.T) {
			logger, ctx := ktesting.NewTestContext(t)
			dir := t.TempDir()
			w, err := fsstore.New(logger, dir, fsstore.WithoutSync())
			if err != nil {
				t.Fatal(err)
			}
			key, err := pullmanager.MappingKey(image)
			if err != nil {
				t.Fatal(err)
			}
			rec := &accessor.ImagePulledRecord{ImageRef: imageRef, CredentialMapping: map[string]accessor.ImagePullCredentials{
				key: {KubernetesSecrets: []accessor.ImagePullSecret{secret}},
			}}
			if err := w.WriteImagePulledRecord(logger, rec); err != nil {
				t.Fatal(err)
			}
			w.Close()

			cache, err := memstore.NewCache(logger, openFSMode(t, logger, dir, mode.opts...))
			if err != nil {
				t.Fatal(err)
			}
			policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := pullmanager.NewImagePullManager(ctx, cache, policy, nil)
			if err != nil {
				t.Fatal(err)
			}
			other := accessor.ImagePullSecret{UID: "uid-b", Namespace: "team-b", Name: "regcred", CredentialHash: "hash-b"}
			for round := range 2 {
				for _, c := range []struct {
					name string
					get  pullmanager.GetPodCredentials
					want bool
				}{
					{"no credentials", creds(), true},
					{"another tenant's secret", creds(other), true},
					{"the recorded secret", creds(secret), false},
				} {
					mustPull, err := m.MustAttemptImagePull(context.WithoutCancel(ctx), image, imageRef, c.get)
					if err != nil {
						t.Errorf("round %d, %s: MustAttemptImagePull error %v", round, c.name, err)
					}
					if mustPull != c.want {
						t.Errorf("round %d, %s: MustAttemptImagePull = %v, want %v", round, c.name, mustPull, c.want)
					}
				}
			}
		})
	}
}

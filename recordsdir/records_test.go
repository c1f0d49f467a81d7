package recordsdir_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/pullmanager"
	"github.com/pullrecords/pullrecords/recordsdir"
)

const (
	privateImage = "registry.example/team/app:v1"
	privateRef   = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

var teamSecret = accessor.ImagePullSecret{
	UID: "uid-team", Namespace: "team", Name: "regcred",
	CredentialHash: imageruntime.CredentialHash(imageruntime.AuthConfig{Username: "team", Password: "not-a-real-secret"}),
}

func testContext(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

func testPolicy(t *testing.T) pullmanager.ImagePullPolicyEnforcer {
	t.Helper()
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	if err != nil {
		t.Fatal(err)
	}
	return policy
}

func open(t *testing.T, ctx context.Context, root string, images imageruntime.ImageLister, opts ...recordsdir.Option) *recordsdir.Records {
	t.Helper()
	r, err := recordsdir.Open(ctx, root, testPolicy(t), images, opts...)
	if err != nil {
		t.Fatalf("Open(%s) = %v", root, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func podWith(secrets ...accessor.ImagePullSecret) pullmanager.GetPodCredentials {
	return func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return secrets, nil, nil
	}
}

type images []imageruntime.Image

func (l images) ListImages(context.Context) ([]imageruntime.Image, error) { return l, nil }

// TestPullRecordedSurvivesReopen: a pull recorded through one Open is on
// disk in the kubelet's directory and decides the same way for a second
// Open: the secret's pod may use the image, a pod without it must pull.
func TestPullRecordedSurvivesReopen(t *testing.T) {
	ctx := testContext(t)
	root := t.TempDir()

	first := open(t, ctx, root, nil)
	if err := first.Manager().RecordPullIntent(klog.FromContext(ctx), privateImage); err != nil {
		t.Fatal(err)
	}
	first.Manager().RecordImagePulled(ctx, privateImage, privateRef, &accessor.ImagePullCredentials{
		KubernetesSecrets: []accessor.ImagePullSecret{teamSecret},
	})
	if err := first.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	files, err := os.ReadDir(filepath.Join(root, fsstore.DirName, fsstore.RecordsDir))
	if err != nil || len(files) != 1 {
		t.Fatalf("records on disk = %v, %v; want one file", files, err)
	}

	second := open(t, ctx, root, nil)
	rec, found, err := second.Accessor().GetImagePulledRecord(privateRef)
	if err != nil || !found {
		t.Fatalf("GetImagePulledRecord after reopen = %v, %v, %v; want the record", rec, found, err)
	}
	if got := rec.CredentialMapping["registry.example/team/app"].KubernetesSecrets; len(got) != 1 || got[0] != teamSecret {
		t.Errorf("secrets after reopen = %+v, want [%+v]", got, teamSecret)
	}
	if must, err := second.Manager().MustAttemptImagePull(ctx, privateImage, privateRef, podWith(teamSecret)); err != nil || must {
		t.Errorf("team pod: MustAttemptImagePull = %v, %v; want false, nil", must, err)
	}
	if must, err := second.Manager().MustAttemptImagePull(ctx, privateImage, privateRef, podWith()); err != nil || !must {
		t.Errorf("pod without the secret: MustAttemptImagePull = %v, %v; want true, nil", must, err)
	}
	intents, err := second.Accessor().ListImagePullIntents()
	if err != nil || len(intents) != 0 {
		t.Errorf("intents after a recorded pull = %v, %v; want none", intents, err)
	}
}

// TestSecondOpenWhileLocked: the directory has one writer. A second Open
// while the first holds the lock fails with fsstore's lock error, wrapped
// with what failed; once the first is closed the lock is free again.
func TestSecondOpenWhileLocked(t *testing.T) {
	ctx := testContext(t)
	root := t.TempDir()
	first := open(t, ctx, root, nil)

	second, err := recordsdir.Open(ctx, root, testPolicy(t), nil)
	if !errors.Is(err, fsstore.ErrLocked) {
		t.Fatalf("second Open = %v, %v; want fsstore.ErrLocked", second, err)
	}
	var locked *fsstore.LockedError
	if !errors.As(err, &locked) || locked.PID != os.Getpid() {
		t.Errorf("second Open = %v; want a *fsstore.LockedError naming this process", err)
	}
	if !strings.HasPrefix(err.Error(), "failed to open the image pull records: ") {
		t.Errorf("second Open error %q does not say what failed", err)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, ctx, root, nil)
}

// TestBadRootDir: a root that cannot hold the records (a regular file, a
// path under one) or no root at all fails Open, saying what failed, and
// creates nothing.
func TestBadRootDir(t *testing.T) {
	ctx := testContext(t)
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, root string
		want       error
	}{
		{"regular file", file, nil},
		{"under a regular file", filepath.Join(file, "kubelet"), nil},
		{"empty", "", recordsdir.ErrNoRootDir},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := recordsdir.Open(ctx, c.root, testPolicy(t), nil)
			if err == nil {
				_ = r.Close()
				t.Fatalf("Open(%q) succeeded; want an error", c.root)
			}
			if !strings.HasPrefix(err.Error(), "failed to open the image pull records: ") {
				t.Errorf("Open(%q) error %q does not say what failed", c.root, err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("Open(%q) = %v; want %v", c.root, err, c.want)
			}
		})
	}
	if _, err := os.Stat(fsstore.DirName); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an Open created %s in the working directory (stat: %v)", fsstore.DirName, err)
	}
}

// TestNilPolicy: a nil policy is refused before the directory is touched.
func TestNilPolicy(t *testing.T) {
	ctx := testContext(t)
	root := t.TempDir()
	r, err := recordsdir.Open(ctx, root, nil, nil)
	if !errors.Is(err, pullmanager.ErrMissingDependency) {
		t.Fatalf("Open with a nil policy = %v, %v; want pullmanager.ErrMissingDependency", r, err)
	}
	if _, err := os.Stat(filepath.Join(root, fsstore.DirName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open with a nil policy created the records directory (stat: %v)", err)
	}
}

// TestFailedManagerReleasesLock: when the manager cannot be built, the
// store Open opened is closed again, so the directory is not left locked
// by a Records nobody holds.
func TestFailedManagerReleasesLock(t *testing.T) {
	ctx := testContext(t)
	root := t.TempDir()
	r, err := recordsdir.Open(ctx, root, testPolicy(t), nil, recordsdir.WithManagerOptions(pullmanager.WithLockStripes(0)))
	if !errors.Is(err, pullmanager.ErrInvalidOption) {
		t.Fatalf("Open with an invalid manager option = %v, %v; want pullmanager.ErrInvalidOption", r, err)
	}
	if !strings.HasPrefix(err.Error(), "failed to create image pull manager: ") {
		t.Errorf("Open error %q does not say what failed", err)
	}
	open(t, ctx, root, nil)
}

// TestCloseTwice: Close is idempotent; after it the records cannot be
// written, and the directory can be opened again.
func TestCloseTwice(t *testing.T) {
	ctx := testContext(t)
	root := t.TempDir()
	r := open(t, ctx, root, nil)
	if err := r.Close(); err != nil {
		t.Fatalf("first Close = %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := r.Manager().RecordPullIntent(klog.FromContext(ctx), privateImage); !errors.Is(err, fsstore.ErrClosed) {
		t.Errorf("RecordPullIntent after Close = %v; want fsstore.ErrClosed", err)
	}
	open(t, ctx, root, nil)
}

// TestOptionsReachStoreAndManager: store options reach fsstore.New (a
// read-only store refuses writes) and manager options reach the manager
// (its clock stamps the record that start-up recovery writes for a
// leftover intent whose image the runtime has).
func TestOptionsReachStoreAndManager(t *testing.T) {
	ctx := testContext(t)
	root := t.TempDir()
	first := open(t, ctx, root, nil)
	if err := first.Manager().RecordPullIntent(klog.FromContext(ctx), privateImage); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	readOnly := open(t, ctx, root, nil, recordsdir.WithStoreOptions(fsstore.WithReadOnly()))
	if err := readOnly.Accessor().WriteImagePullIntent(klog.FromContext(ctx), "other.example/app:1"); !errors.Is(err, fsstore.ErrReadOnly) {
		t.Errorf("write through a read-only Open = %v; want fsstore.ErrReadOnly", err)
	}
	if err := readOnly.Close(); err != nil {
		t.Fatal(err)
	}

	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	runtime := images{{ID: privateRef, RepoTags: []string{privateImage}}}
	r := open(t, ctx, root, runtime,
		recordsdir.WithStoreOptions(fsstore.WithoutSync()),
		recordsdir.WithManagerOptions(pullmanager.WithClock(clocktesting.NewFakePassiveClock(now))))
	rec, found, err := r.Accessor().GetImagePulledRecord(privateRef)
	if err != nil || !found {
		t.Fatalf("record from start-up recovery = %v, %v, %v; want one", rec, found, err)
	}
	if !rec.LastUpdatedTime.Time.Equal(now) {
		t.Errorf("record time = %v, want the injected clock's %v", rec.LastUpdatedTime.Time, now)
	}
	if exists, err := r.Accessor().ImagePullIntentExists(privateImage); err != nil || exists {
		t.Errorf("leftover intent after recovery: exists = %v, %v; want false", exists, err)
	}
}

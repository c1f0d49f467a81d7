package recordsdir_test

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/pullmanager"
	"github.com/pullrecords/pullrecords/recordsdir"
)

// listTree returns every path under dir, relative to it, with a file's
// contents, so two listings compare the tree byte for byte.
func listTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// With credential expiry, a secret vouches for TTL after the pull made with
// it, across a restart; afterwards the pod must pull again, the record
// stays (the image never looks preloaded: a pod without the secret must
// still pull), and a new pull renews it. The kubelet's directory holds
// exactly what it holds without expiry.
func TestCredentialExpiry(t *testing.T) {
	ctx := testContext(t)
	const ttl = time.Hour
	start := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	root, plainRoot := t.TempDir(), t.TempDir()
	proofs := filepath.Join(t.TempDir(), "proofs")
	withExpiry := []recordsdir.Option{
		recordsdir.WithManagerOptions(pullmanager.WithClock(clk)),
		recordsdir.WithCredentialExpiry(proofs, ttl, credstamp.WithClock(clk)),
	}
	pull := func(r *recordsdir.Records) {
		t.Helper()
		m := r.Manager()
		if err := m.RecordPullIntent(klog.FromContext(ctx), privateImage); err != nil {
			t.Fatal(err)
		}
		m.RecordImagePulled(ctx, privateImage, privateRef, &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{teamSecret}})
	}
	mustPull := func(r *recordsdir.Records, who string, creds pullmanager.GetPodCredentials, want bool) {
		t.Helper()
		got, err := r.Manager().MustAttemptImagePull(ctx, privateImage, privateRef, creds)
		if err != nil || got != want {
			t.Fatalf("%s at +%v: MustAttemptImagePull = %v, %v; want %v", who, clk.Since(start), got, err, want)
		}
	}

	r := open(t, ctx, root, nil, withExpiry...)
	pull(r)
	mustPull(r, "pod with the secret", podWith(teamSecret), false)
	mustPull(r, "pod without it", podWith(), true)

	// A restart keeps the proof.
	clk.Step(ttl - time.Minute)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, ctx, root, nil, withExpiry...)
	mustPull(r, "after a restart, within the TTL, pod with the secret", podWith(teamSecret), false)

	// Past the TTL, also across a restart.
	clk.Step(time.Minute)
	mustPull(r, "past the TTL, pod with the secret", podWith(teamSecret), true)
	mustPull(r, "past the TTL, pod without it", podWith(), true)
	r.Close()
	r = open(t, ctx, root, nil, withExpiry...)
	mustPull(r, "after a restart past the TTL, pod with the secret", podWith(teamSecret), true)
	if rec, ok, err := r.Accessor().GetImagePulledRecord(privateRef); err != nil || !ok || len(rec.CredentialMapping) == 0 {
		t.Fatalf("the record did not stay after its credential expired: %v, %v, %v", rec, ok, err)
	}

	// A pull renews.
	pull(r)
	mustPull(r, "after the renewing pull, pod with the secret", podWith(teamSecret), false)
	r.Close()

	// Without expiry, the same pulls at the same times write the same
	// kubelet directory.
	clk.SetTime(start)
	p := open(t, ctx, plainRoot, nil, recordsdir.WithManagerOptions(pullmanager.WithClock(clk)))
	pull(p)
	clk.Step(ttl)
	pull(p)
	p.Close()
	got, want := listTree(t, filepath.Join(root, fsstore.DirName)), listTree(t, filepath.Join(plainRoot, fsstore.DirName))
	if len(got) != len(want) {
		t.Fatalf("image_manager with expiry has %d entries, without %d", len(got), len(want))
	}
	var names []string
	for name := range want {
		names = append(names, name)
		if got[name] != want[name] {
			t.Errorf("image_manager/%s differs with expiry:\n%s\nwithout:\n%s", name, got[name], want[name])
		}
	}
	sort.Strings(names)
	t.Logf("image_manager, identical with and without expiry: %v", names)
	if entries, err := os.ReadDir(proofs); err != nil || len(entries) == 0 {
		t.Errorf("the proofs directory holds %d entries (%v), want the pull's proof", len(entries), err)
	}
}

func TestCredentialExpiryRefusedOptions(t *testing.T) {
	ctx := testContext(t)
	root := t.TempDir()
	for name, opt := range map[string]recordsdir.Option{
		"zero TTL":               recordsdir.WithCredentialExpiry(filepath.Join(t.TempDir(), "p"), 0),
		"negative TTL":           recordsdir.WithCredentialExpiry(filepath.Join(t.TempDir(), "p"), -time.Second),
		"relative directory":     recordsdir.WithCredentialExpiry("proofs", time.Hour),
		"inside image_manager":   recordsdir.WithCredentialExpiry(filepath.Join(root, fsstore.DirName, "proofs"), time.Hour),
		"image_manager itself":   recordsdir.WithCredentialExpiry(filepath.Join(root, fsstore.DirName), time.Hour),
		"image_manager, unclean": recordsdir.WithCredentialExpiry(filepath.Join(root, "x", "..", fsstore.DirName, "pulled"), time.Hour),
	} {
		r, err := recordsdir.Open(ctx, root, testPolicy(t), nil, opt)
		if err == nil {
			r.Close()
			t.Errorf("%s: Open accepted it", name)
			continue
		}
		if !errors.Is(err, pullmanager.ErrInvalidOption) || !strings.HasPrefix(err.Error(), "failed to open the credential proofs: ") {
			t.Errorf("%s: %v; want ErrInvalidOption from opening the credential proofs", name, err)
		}
		// Nothing stays open: the directory can be opened again.
		again, err := recordsdir.Open(ctx, root, testPolicy(t), nil)
		if err != nil {
			t.Fatalf("%s: after the refusal, Open: %v (the lock was not released)", name, err)
		}
		again.Close()
	}
}

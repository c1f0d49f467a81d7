package pullmanager

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/memstore"
)

// The node the evidence tests play: four images present in the runtime.
const (
	evPrivateImg = "registry.example/team-a/api:1.4" // pulled with team-a's secret
	evPrivateRef = "sha256:private"
	evPublicImg  = "docker.io/library/nginx:1.27" // pulled node-wide
	evPublicRef  = "sha256:public"
	evBrokenImg  = "registry.example/team-a/db:2" // its record is the broken entry
	evBrokenRef  = "sha256:broken"
	evLoadedImg  = "registry.example/team-a/job:7" // no record; an intent of its image string
	evLoadedRef  = "sha256:loaded"
)

var evTeamA = secret("uid-a", "team-a", "regcred", "hash-a")

// evidenceEntry is one kind of broken entry and how to plant it.
type evidenceEntry struct {
	name  string
	plant func(t *testing.T, kubeletDir string)
}

func evPath(kubeletDir, sub, key string) string {
	return filepath.Join(kubeletDir, fsstore.DirName, sub, fsstore.FileName(key))
}

func evWrite(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func evRecordBytes(t *testing.T, ref string, key string, c accessor.ImagePullCredentials) []byte {
	t.Helper()
	data, err := accessor.EncodePulledRecord(&accessor.ImagePulledRecord{
		LastUpdatedTime:   t0Meta(),
		ImageRef:          ref,
		CredentialMapping: map[string]accessor.ImagePullCredentials{key: c},
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// evidenceEntries are the broken entries issue 18 lists: each planted on
// the node above, under the records' or the intents' name.
func evidenceEntries() []evidenceEntry {
	brokenRecord := func(t *testing.T, kubeletDir string) string {
		return evPath(kubeletDir, fsstore.RecordsDir, evBrokenRef)
	}
	return []evidenceEntry{
		{"truncated record", func(t *testing.T, d string) {
			full := evRecordBytes(t, evBrokenRef, "registry.example/team-a/db", accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{evTeamA}})
			evWrite(t, brokenRecord(t, d), full[:len(full)/2])
		}},
		{"oversized record", func(t *testing.T, d string) {
			f, err := os.Create(brokenRecord(t, d))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(33 << 20); err != nil { // sparse, past the 32 MiB read limit
				t.Fatal(err)
			}
		}},
		{"intent under the record's name (wrong kind)", func(t *testing.T, d string) {
			data, err := accessor.EncodeIntent(&accessor.ImagePullIntent{Image: evBrokenRef})
			if err != nil {
				t.Fatal(err)
			}
			evWrite(t, brokenRecord(t, d), data)
		}},
		{"directory under the record's name", func(t *testing.T, d string) {
			p := brokenRecord(t, d)
			if err := os.MkdirAll(filepath.Join(p, "inner"), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"FIFO under the record's name", func(t *testing.T, d string) {
			if err := syscall.Mkfifo(brokenRecord(t, d), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"symbolic link under the record's name", func(t *testing.T, d string) {
			target := evPath(d, fsstore.RecordsDir, evPublicRef)
			if err := os.Symlink(target, brokenRecord(t, d)); err != nil {
				t.Fatal(err)
			}
		}},
		{"record naming another key (wrong name)", func(t *testing.T, d string) {
			evWrite(t, brokenRecord(t, d), evRecordBytes(t, "sha256:elsewhere", "registry.example/team-a/db", accessor.ImagePullCredentials{NodePodsAccessible: true}))
		}},
		{"corrupt intent", func(t *testing.T, d string) {
			evWrite(t, evPath(d, fsstore.IntentsDir, evLoadedImg), []byte(`{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","ima`))
		}},
	}
}

func t0Meta() metav1.Time { return metav1.NewTime(t0) }

// evidenceNode writes the node's records (one of them in v1alpha1, so that
// migration has work), then plants e.
func evidenceNode(t *testing.T, e evidenceEntry) string {
	d := t.TempDir()
	evWrite(t, evPath(d, fsstore.RecordsDir, evPrivateRef), evRecordBytes(t, evPrivateRef, "registry.example/team-a/api",
		accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{evTeamA}}))
	v1beta1 := evRecordBytes(t, evPublicRef, "docker.io/library/nginx", accessor.ImagePullCredentials{NodePodsAccessible: true})
	evWrite(t, evPath(d, fsstore.RecordsDir, evPublicRef), bytes.Replace(v1beta1, []byte("v1beta1"), []byte("v1alpha1"), 1))
	if err := os.MkdirAll(filepath.Join(d, fsstore.DirName, fsstore.IntentsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	e.plant(t, d)
	return d
}

// evidenceRuntime holds the four images.
func evidenceRuntime() *gcRuntime {
	return &gcRuntime{present: map[string]bool{evPrivateRef: true, evPublicRef: true, evBrokenRef: true, evLoadedRef: true}}
}

// evidenceChecks are the checks asked of the node: every image string with
// every present imageRef, by a pod without credentials, with team-a's secret
// and with another tenant's.
func evidenceChecks() (out []evidenceCheck) {
	pods := map[string][]accessor.ImagePullSecret{
		"no credentials": nil,
		"team-a secret":  {evTeamA},
		"team-b secret":  {secret("uid-b", "team-b", "regcred", "hash-b")},
	}
	for _, img := range []string{evPrivateImg, evPublicImg, evBrokenImg, evLoadedImg} {
		for _, ref := range []string{evPrivateRef, evPublicRef, evBrokenRef, evLoadedRef} {
			for pod, secrets := range pods {
				out = append(out, evidenceCheck{checkKey: checkKey{image: img, ref: ref, pod: pod}, secrets: secrets})
			}
		}
	}
	return out
}

type evidenceCheck struct {
	checkKey
	secrets []accessor.ImagePullSecret
}

// checkKey names a check: the image, its imageRef and the pod asking.
type checkKey struct{ image, ref, pod string }

// decisions answers every check under policy p from the files in kubeletDir,
// the way a kubelet starting on them would (read-only here, so nothing is
// written while deciding).
func decisions(t *testing.T, kubeletDir string, p VerificationPolicy) map[checkKey]Explanation {
	t.Helper()
	fs, err := fsstore.New(logr.Discard(), kubeletDir, fsstore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	c, err := memstore.NewCache(logr.Discard(), fs)
	if err != nil {
		t.Fatal(err)
	}
	var allow []string
	if p == NeverVerifyAllowlistedImages {
		allow = []string{"docker.io/library/nginx", "registry.example/team-a/*"}
	}
	ctx, _ := testCtx(t)
	m, err := NewImagePullManager(ctx, c, mustPolicy(t, p, allow...), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[checkKey]Explanation{}
	for _, ch := range evidenceChecks() {
		out[ch.checkKey] = m.ExplainImagePull(ctx, ch.image, ch.ref, podCreds(new(int), ch.secrets, nil, nil))
	}
	return out
}

// The operations that write a node's records and must never relax a check:
// the cores of fsck --repair, migrate --apply (a writable open migrates) and
// prune (with the garbage collector's partial list: nothing).
var evidenceOps = []struct {
	name string
	run  func(t *testing.T, kubeletDir string)
}{
	{"fsck --repair", func(t *testing.T, d string) {
		if _, err := fsstore.Repair(logr.Discard(), d, nil); err != nil {
			t.Fatal(err)
		}
	}},
	{"migrate --apply", func(t *testing.T, d string) {
		s, err := fsstore.New(logr.Discard(), d)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}},
	{"prune", func(t *testing.T, d string) {
		s, err := fsstore.New(logr.Discard(), d, fsstore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c, err := memstore.NewCache(logr.Discard(), s)
		if err != nil {
			t.Fatal(err)
		}
		ctx, _ := testCtx(t)
		clk := testingclock.NewFakeClock(t0.Add(24 * time.Hour))
		// nil lister for the constructor (no start-up recovery writes);
		// the runtime is consulted by the prune itself.
		m, err := NewImagePullManager(ctx, c, mustPolicy(t, AlwaysVerify), nil, WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		m.images = evidenceRuntime()
		m.PruneUnknownRecords(ctx, nil, clk.Now())
	}},
}

// TestRepairKeepsTheEvidence: for every broken entry, every policy and every
// check, an operation that answered "must pull" before still does after
// fsck --repair, migrate --apply and prune. The entries that read as errors
// must make some check answer at step 4 before, so the test cannot pass
// vacuously.
func TestRepairKeepsTheEvidence(t *testing.T) {
	for _, e := range evidenceEntries() {
		for _, op := range evidenceOps {
			t.Run(e.name+"/"+op.name, func(t *testing.T) {
				dir := evidenceNode(t, e)
				before := map[VerificationPolicy]map[checkKey]Explanation{}
				for _, p := range modelPolicies {
					before[p] = decisions(t, dir, p)
				}
				op.run(t, dir)
				step4 := 0
				for _, p := range modelPolicies {
					after := decisions(t, dir, p)
					for ch, b := range before[p] {
						if b.DecidedAt == StepRecordsError {
							step4++
						}
						a := after[ch]
						if b.MustPull && !a.MustPull {
							t.Errorf("SECURITY: %s relaxed a check under %s: %s as %s for a pod with %s: before must pull (step %d: %s), after may use (step %d: %s)",
								op.name, p, ch.image, ch.ref, ch.pod, b.DecidedAt, b.Rule, a.DecidedAt, a.Rule)
						}
					}
				}
				if !strings.Contains(e.name, "wrong name") && step4 == 0 {
					t.Errorf("no check read the broken entry as an error before %s: the test proves nothing", op.name)
				}
			})
		}
	}
}

// Ensure the fixtures are what the test thinks: the record naming another
// key reads as "no record" for both keys.
func TestEvidenceFixtures(t *testing.T) {
	dir := evidenceNode(t, evidenceEntries()[6])
	d := decisions(t, dir, AlwaysVerify)
	got := d[checkKey{image: evBrokenImg, ref: evBrokenRef, pod: "no credentials"}]
	if got.DecidedAt != StepNoRecord {
		t.Fatalf("record naming another key: %s", fmt.Sprint(got.DecidedAt, " ", got.Rule))
	}
}

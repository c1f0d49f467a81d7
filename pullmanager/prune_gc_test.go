package pullmanager

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// gcRuntime is a runtime whose image set changes during a test.
type gcRuntime struct {
	present map[string]bool // image ID -> present
	err     error
	// afterList, if set, runs once after a list was taken, as a pull that
	// finishes right then would.
	afterList func()
}

func (r *gcRuntime) ListImages(context.Context) ([]imageruntime.Image, error) {
	if r.err != nil {
		return nil, r.err
	}
	var out []imageruntime.Image
	for id, ok := range r.present {
		if ok {
			out = append(out, imageruntime.Image{ID: id})
		}
	}
	if f := r.afterList; f != nil {
		r.afterList = nil
		f()
	}
	return out, nil
}

// ids is what the kubelet's garbage collector would pass as the images left.
func (r *gcRuntime) ids() []string {
	var out []string
	for id, ok := range r.present {
		if ok {
			out = append(out, id)
		}
	}
	return out
}

// TestPruneKeepsRecordOfPresentImage plays the sequences in which the
// kubelet's image garbage collection would delete the record of an image the
// runtime holds, which then looks preloaded: under NeverVerifyPreloadedImages
// a pod without credentials would be told "no pull needed" for an image
// pulled with team-a's secret. Each case must end with the record kept and
// the pod told to pull, or (last case) the record gone with the image.
func TestPruneKeepsRecordOfPresentImage(t *testing.T) {
	teamA := secret("uid-a", "team-a", "regcred", "hash-a")
	credsA := &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{teamA}}
	cases := []struct {
		name string
		// gc runs one image garbage collection and its prune hook, as the
		// kubelet orders them, on a node where imgX (refA) was pulled with
		// team-a's secret an hour before.
		gc         func(ctx context.Context, m *PullManager, rt *gcRuntime, now time.Time)
		keptRecord bool
	}{{
		// Image GC removes X; a pod re-pulls X with the same secret, which
		// changes nothing in the record; the hook then prunes with the
		// image list read before the re-pull.
		name: "re-pull with unchanged credentials after the list was read",
		gc: func(ctx context.Context, m *PullManager, rt *gcRuntime, now time.Time) {
			until := now
			rt.present[refA] = false
			imagesLeft := rt.ids()
			m.RecordPullIntent(klog.FromContext(ctx), imgX)
			rt.present[refA] = true
			m.RecordImagePulled(ctx, imgX, refA, credsA)
			m.PruneUnknownRecords(ctx, imagesLeft, until)
		},
		keptRecord: true,
	}, {
		// The same, but the re-pull finishes after the prune listed the
		// runtime again: only the pull the manager recorded tells.
		name: "re-pull with unchanged credentials while the prune runs",
		gc: func(ctx context.Context, m *PullManager, rt *gcRuntime, now time.Time) {
			until := now
			rt.present[refA] = false
			imagesLeft := rt.ids()
			m.RecordPullIntent(klog.FromContext(ctx), imgX)
			rt.afterList = func() {
				rt.present[refA] = true
				m.RecordImagePulled(ctx, imgX, refA, credsA)
			}
			m.PruneUnknownRecords(ctx, imagesLeft, until)
		},
		keptRecord: true,
	}, {
		// The kubelet passes only the images it considered for eviction:
		// one in use by a container is left out of the list.
		name: "image in use, left out of the garbage collector's list",
		gc: func(ctx context.Context, m *PullManager, rt *gcRuntime, now time.Time) {
			m.PruneUnknownRecords(ctx, nil, now)
		},
		keptRecord: true,
	}, {
		name: "runtime cannot be listed: nothing is pruned",
		gc: func(ctx context.Context, m *PullManager, rt *gcRuntime, now time.Time) {
			rt.err = errors.New("runtime unavailable")
			m.PruneUnknownRecords(ctx, nil, now)
		},
		keptRecord: true,
	}, {
		name: "image really gone: the record goes (kubelet semantics)",
		gc: func(ctx context.Context, m *PullManager, rt *gcRuntime, now time.Time) {
			rt.present[refA] = false
			m.PruneUnknownRecords(ctx, rt.ids(), now)
		},
		keptRecord: false,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _ := testCtx(t)
			dir := t.TempDir()
			store := openDiskStore(t, dir, fsstore.WithoutSync())
			rt := &gcRuntime{present: map[string]bool{refA: true, "sha256:other": true}}
			clk := testingclock.NewFakeClock(t0)
			m, err := NewImagePullManager(ctx, store, mustPolicy(t, NeverVerifyPreloadedImages), rt, WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			m.RecordPullIntent(klog.FromContext(ctx), imgX)
			m.RecordImagePulled(ctx, imgX, refA, credsA)
			clk.Step(time.Hour)

			tc.gc(ctx, m, rt, clk.Now())

			_, found, err := store.GetImagePulledRecord(refA)
			if err != nil {
				t.Fatal(err)
			}
			if found != tc.keptRecord {
				t.Fatalf("record of %s found = %v, want %v", refA, found, tc.keptRecord)
			}
			if !tc.keptRecord {
				return
			}
			// A team-b pod without credentials, imagePullPolicy IfNotPresent.
			must, err := m.MustAttemptImagePull(ctx, imgX, refA, podCreds(new(int), nil, nil, nil))
			if err != nil || !must {
				t.Fatalf("SECURITY: a pod without credentials got (must pull %v, %v) for an image pulled with team-a's secret", must, err)
			}
			// team-a's own pod still may use it.
			must, err = m.MustAttemptImagePull(ctx, imgX, refA, podCreds(new(int), []accessor.ImagePullSecret{teamA}, nil, nil))
			if err != nil || must {
				t.Fatalf("team-a's pod got (must pull %v, %v), want may use", must, err)
			}
		})
	}
}

// TestRecentPullsStayBounded: what the manager remembers of pulls for the
// prune goes with the record it protected.
func TestRecentPullsStayBounded(t *testing.T) {
	ctx, _ := testCtx(t)
	store := newFaultyStore()
	rt := &gcRuntime{present: map[string]bool{}}
	clk := testingclock.NewFakeClock(t0)
	m, err := NewImagePullManager(ctx, store.Accessor(), mustPolicy(t, AlwaysVerify), rt, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"ref1", "ref2", "ref3"} {
		m.RecordImagePulled(ctx, imgX, ref, &accessor.ImagePullCredentials{NodePodsAccessible: true})
	}
	clk.Step(time.Hour)
	m.PruneUnknownRecords(ctx, nil, clk.Now())
	if left := storedRefs(t, store.Inner()); len(left) != 0 {
		t.Errorf("records left after their images were gone: %v", left)
	}
	m.pulls.mu.Lock()
	defer m.pulls.mu.Unlock()
	if len(m.pulls.at) != 0 {
		t.Errorf("remembered pulls after their records were pruned: %v", m.pulls.at)
	}
}

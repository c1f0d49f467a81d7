package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/pullmanager"
)

type pruneOptions struct {
	endpoint  string
	olderThan string
	dryRun    bool
	timeout   time.Duration
}

type pruneOutput struct {
	Until  string       `json:"until"`
	Images int          `json:"runtimeImages"`
	Pruned []recordView `json:"pruned"`
	Kept   int          `json:"kept"`
	DryRun bool         `json:"dryRun"`
}

func newPruneCmd(g *globalOptions) *cobra.Command {
	o := &pruneOptions{}
	cmd := &cobra.Command{
		Use:   "prune --cri ENDPOINT",
		Short: "Delete records of images the container runtime no longer has (writes)",
		Long: `Delete the pulled records of images the container runtime no longer has, as the
kubelet does after image garbage collection: a record is deleted only if its
imageRef is not among the runtime's image IDs and it was last updated before the
cut-off (now minus --older-than, taken before the runtime is asked for its images,
so a record written during the listing is never pruned). Intents are never pruned.

Stop the kubelet first (then pass --kubelet-stopped if it is still detected), or
use --dry-run, which writes nothing and takes no lock.`,
		Example: `  pullrecords prune --cri unix:///run/containerd/containerd.sock --older-than 24h --dry-run`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPrune(cmd.Context(), g, o, clock.RealClock{})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.endpoint, "cri", "", "CRI endpoint: unix:///path/to.sock or /path/to.sock (required)")
	f.StringVar(&o.olderThan, "older-than", "0s", "only prune records last updated at least this long ago (Go duration, or days as 7d)")
	f.BoolVar(&o.dryRun, "dry-run", false, "list what would be pruned without writing")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "timeout of each CRI call")
	addNoHeaders(cmd, g)
	return cmd
}

// parseAge parses a Go duration or a whole number of days ("7d").
func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, usageErrorf("--older-than %q: want a duration such as 36h or 7d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, usageErrorf("--older-than %q: want a duration such as 36h or 7d", s)
	}
	return d, nil
}

// dialCRI connects to endpoint with a clear error for each way it can fail.
func dialCRI(ctx context.Context, endpoint string, timeout time.Duration) (*cri.ImageService, error) {
	if endpoint == "" {
		return nil, usageErrorf("--cri is required (for example unix:///run/containerd/containerd.sock)")
	}
	svc, err := cri.Dial(ctx, endpoint, cri.WithCallTimeout(timeout))
	switch {
	case err == nil:
		return svc, nil
	case errors.Is(err, cri.ErrInvalidEndpoint):
		return nil, fmt.Errorf("--cri %s: %w", endpoint, err)
	case errors.Is(err, cri.ErrInvalidOption):
		return nil, usageErrorf("--timeout %v: want 0 (no timeout) or more", timeout)
	case errors.Is(err, cri.ErrEndpointNotFound), errors.Is(err, cri.ErrNotCRI):
		return nil, err
	default:
		return nil, fmt.Errorf("cannot reach the CRI image service at %s: %w", endpoint, err)
	}
}

func runPrune(ctx context.Context, g *globalOptions, o *pruneOptions, clk clock.PassiveClock) error {
	age, err := parseAge(o.olderThan)
	if err != nil {
		return err
	}
	if err := checkKubeletDir(g.kubeletDir); err != nil {
		return err
	}
	if !o.dryRun {
		if err := g.guardWrite(ctx, "prune"); err != nil {
			return err
		}
	}
	prog := g.startProgress("prune")
	defer prog.stop()
	prog.phase("connecting to "+o.endpoint, 0)
	svc, err := dialCRI(ctx, o.endpoint, o.timeout)
	if err != nil {
		return err
	}
	defer svc.Close()

	// The cut-off is taken before the runtime lists its images.
	until := clk.Now().Add(-age)
	prog.phase("listing the runtime's images", 0)
	images, err := svc.ListImages(ctx)
	if err != nil {
		return fmt.Errorf("listing images at %s: %w", o.endpoint, err)
	}
	ids := make([]string, 0, len(images))
	present := make(map[string]bool, len(images))
	for _, img := range images {
		ids = append(ids, img.ID)
		present[img.ID] = true
	}

	prog.phase(checkingPhase(prog, g.kubeletDir, "reading"), 0)
	var store readStore
	if o.dryRun {
		store, err = g.openReadOnly()
	} else {
		store, err = g.openWritable("prune")
	}
	if err != nil {
		return err
	}
	defer store.Close()
	records, err := store.ListImagePulledRecords()
	var le *accessor.ListError
	if err != nil && !errors.As(err, &le) {
		return err
	}
	if le != nil {
		prog.println(g.stderr, fmt.Sprintf("pullrecords: warning: %s could not be read and will not be pruned; run \"pullrecords fsck\"", plural(len(le.Errs), "record file")))
	}
	out := pruneOutput{Until: until.UTC().Format(time.RFC3339), Images: len(images), Pruned: []recordView{}, DryRun: o.dryRun}
	var candidates []*accessor.ImagePulledRecord
	for _, r := range records {
		if !present[r.ImageRef] && r.LastUpdatedTime.Time.Before(until) {
			candidates = append(candidates, r)
		}
	}
	if !o.dryRun && len(candidates) > 0 {
		prog.phase("pruning records", len(candidates))
		var acc accessor.PullRecordsAccessor = store
		if prog != nil {
			acc = countingDeletes{store, prog}
		}
		mgr, err := pullmanager.NewImagePullManager(klog.NewContext(ctx, g.logger()), acc, alwaysVerify{}, nil)
		if err != nil {
			return err
		}
		mgr.PruneUnknownRecords(klog.NewContext(ctx, g.logger()), ids, until)
		// Report what is actually gone.
		prog.phase("checking what is gone", len(candidates))
		gone := candidates[:0]
		for _, r := range candidates {
			prog.step()
			if _, exists, err := store.GetImagePulledRecord(r.ImageRef); err == nil && !exists {
				gone = append(gone, r)
			}
		}
		candidates = gone
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].ImageRef < candidates[j].ImageRef })
	for _, r := range candidates {
		out.Pruned = append(out.Pruned, viewRecord(r))
	}
	out.Kept = len(records) - len(out.Pruned)
	prog.stop()
	s := g.style()
	return g.emit(out, func(w io.Writer) error {
		if len(out.Pruned) > 0 {
			t := newTable(
				column{header: "IMAGEREF", hex: true, fit: fitMiddle, min: 20},
				column{header: "NAMES", fit: fitMiddle, min: 20},
				column{header: "UPDATED"},
			)
			for _, r := range out.Pruned {
				t.add(r.ImageRef, r.namesCell(), orDash(r.LastUpdated))
			}
			if err := t.write(w, s); err != nil {
				return err
			}
		}
		if s.noHeaders {
			return nil
		}
		if len(out.Pruned) > 0 {
			fmt.Fprintln(w)
		}
		verb := "pruned"
		if out.DryRun {
			verb = "would prune (dry run)"
		}
		fmt.Fprintf(w, "%s %s of images not among the runtime's %s, updated before %s; %s kept\n",
			verb, plural(len(out.Pruned), "record"), plural(out.Images, "image"), out.Until, plural(out.Kept, "record"))
		return nil
	})
}

// alwaysVerify is the policy given to the manager used only for pruning; it
// never makes a decision.
type alwaysVerify struct{}

func (alwaysVerify) RequireCredentialVerificationForImage(string, bool) bool { return true }

// countingDeletes counts the records the pull manager deletes on the
// progress line. It is used only while the line is shown: it hides the
// store's optional interfaces (accessor.RecordCounter, RecordPeeker), which
// only feed metrics the command does not show.
type countingDeletes struct {
	readStore
	prog *workProgress
}

func (c countingDeletes) DeleteImagePulledRecord(logger klog.Logger, imageRef string) error {
	err := c.readStore.DeleteImagePulledRecord(logger, imageRef)
	c.prog.step()
	return err
}

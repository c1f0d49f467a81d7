package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/demo"
	"github.com/pullrecords/pullrecords/fsstore"
)

type demoOptions struct {
	keep     bool
	dir      string
	reuse    bool
	noTiming bool
}

// demoIntro opens the demo's table output: the threat, what the answers
// and step numbers mean, and the kubelet settings that turn the check on.
const demoIntro = `pullrecords demo: a shared node, played with the real pull records and pull manager

The threat: team-a pulls registry.example.com/team-a/api:1.4 with its pull secret; a team-b pod on
the same node asks for the same image with imagePullPolicy: IfNotPresent. The image is present, so a
kubelet without the check starts it: team-b runs team-a's private image with no credential for it.
The check (KEP-2535) answers, for every container whose image is already present:
  may use    the pod's own credentials were recorded for the image, or the policy exempts it
  must pull  the kubelet first pulls with the pod's own credentials (refused -> ErrImagePull)
  [step N]   the step of the kubelet's decision order (MustAttemptImagePull, 1-14) that decided
It is on with the kubelet feature gate KubeletEnsureSecretPulledImages (beta, on by default since
v1.35); the KubeletConfiguration field imagePullCredentialsVerificationPolicy picks what is exempt
(default NeverVerifyPreloadedImages: images the kubelet never pulled), and
preloadedImagesVerificationAllowlist lists the image patterns NeverVerifyAllowlistedImages exempts.
Only the runtime and the registries are fakes; each answer is explained by the manager's dry run
and checked against its real decision.
`

// demoMarker is the file the demo leaves in a --dir it made, so --reuse
// knows it may replace the records there.
const demoMarker = ".pullrecords-demo"

type demoOutput struct {
	KubeletDir string       `json:"kubeletDir,omitempty"`
	Events     []demo.Event `json:"events"`
	Summary    demo.Summary `json:"summary"`
}

func newDemoCmd(g *globalOptions) *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Play a multi-tenant node and show every pull decision (writes only to a temp dir)",
		Long: `Play a multi-tenant node in a temporary kubelet directory: pods from three
namespaces with pull secrets, a service account, an anonymous image, a preloaded
image, a credential rotation, a kubelet restart in the middle of a pull, image
garbage collection with record pruning, two other policies, and a preloaded image
whose content is pulled under a second name (kubernetes#138175), with and without
the manager's fix. Every pod the registry refuses an image already on the node
says whose private image it would have run without the check. Everything is
real except the container runtime and the registry, which run in-process: the
record store on disk (with fsync), the write-through cache and the pull manager.

Every decision is printed with the step that made it. The step comes from the
pull manager's explanation of its own decision (a dry run of the same code, which
writes nothing), and is checked at run time against the answer, the credential
lookup and the record write of the real check; if they ever disagree the demo
stops with exit status 2.

Needs no root, no socket and no network. --kubelet-dir is ignored: use --dir,
which must be new or empty (or, with --reuse, one an earlier demo made).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.keep, "keep", false, "keep the kubelet directory (its path is printed) for the other commands")
	f.StringVar(&o.dir, "dir", "", "use this kubelet directory (new or empty; created if missing, kept) instead of a temporary one")
	f.BoolVar(&o.reuse, "reuse", false, "with --dir: start over in a directory an earlier demo made (its image_manager/ is replaced)")
	f.BoolVar(&o.noTiming, "no-timing", false, "do not print the elapsed time (for reproducible output)")
	return cmd
}

func runDemo(cmd *cobra.Command, g *globalOptions, o *demoOptions) error {
	f, err := parseFormat(g.output)
	if err != nil {
		return err
	}
	if o.reuse && o.dir == "" {
		return usageErrorf("demo: --reuse needs --dir")
	}
	dir := o.dir
	keep := o.keep || o.dir != ""
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pullrecords-demo-"); err != nil {
			return fmt.Errorf("cannot create a temporary directory: %w", err)
		}
	} else if err := prepareDemoDir(dir, o.reuse); err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}

	out := demoOutput{Events: []demo.Event{}}
	if keep {
		out.KubeletDir = dir
	}
	table := f == formatTable
	if table {
		fmt.Fprint(g.stdout, demoIntro)
		if keep {
			fmt.Fprintf(g.stdout, "kubelet dir: %s (kept)\n", dir)
		} else {
			fmt.Fprintln(g.stdout, "kubelet dir: a temporary directory, removed at exit (--keep keeps it)")
		}
	}
	sum, err := demo.Run(cmd.Context(), demo.Config{
		KubeletDir: dir,
		Logger:     g.logger(),
		OnEvent: func(e demo.Event) {
			if table {
				fmt.Fprint(g.stdout, e.Format())
			}
			out.Events = append(out.Events, e)
		},
	})
	if errors.Is(err, demo.ErrDisagree) {
		fmt.Fprintln(g.stderr, "pullrecords: BUG: THE PULL MANAGER'S EXPLANATION AND ITS CHECK DISAGREE")
		return err
	}
	if err != nil {
		return fmt.Errorf("demo failed: %w", err)
	}
	out.Summary = sum
	if !table {
		return g.emit(out, nil)
	}
	fmt.Fprint(g.stdout, sum.Format(!o.noTiming))
	if keep {
		fmt.Fprintf(g.stdout, "\nThe records are kept. Try:\n  pullrecords --kubelet-dir %s ls\n  pullrecords --kubelet-dir %s fsck\n", dir, dir)
		fmt.Fprintf(g.stdout, "  pullrecords --kubelet-dir %s explain registry.example.com/team-a/api:1.4 %s --secret team-b/regcred/9d2e44f0-b001\n",
			dir, demo.ImageRef("registry.example.com/team-a/api:1.4"))
	}
	return nil
}

// prepareDemoDir makes dir ready for the demo: a new or empty directory is
// used as it is; a non-empty one only with reuse, and only if an earlier
// demo made it (the marker file), whose image_manager/ is then removed. The
// demo never writes records into a directory it did not make, such as a
// real kubelet's.
func prepareDemoDir(dir string, reuse bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", dir, err)
	}
	marker := filepath.Join(dir, demoMarker)
	if len(entries) > 0 {
		_, merr := os.Lstat(marker)
		switch {
		case merr != nil:
			return fmt.Errorf("demo: --dir %s is not empty and was not made by the demo; refusing to write records there (give a new or empty directory)", esc(dir))
		case !reuse:
			return fmt.Errorf("demo: --dir %s holds an earlier demo's records; add --reuse to start over in it, or give a new or empty directory", esc(dir))
		}
		if err := os.RemoveAll(filepath.Join(dir, fsstore.DirName)); err != nil {
			return fmt.Errorf("cannot remove the earlier demo's records: %w", err)
		}
		return nil
	}
	return os.WriteFile(marker, []byte("made by \"pullrecords demo\"; \"pullrecords demo --reuse\" may replace image_manager/ here\n"), 0o600)
}

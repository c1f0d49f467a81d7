package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/demo"
)

type demoOptions struct {
	keep     bool
	dir      string
	noTiming bool
}

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
the manager's fix. Everything is
real except the container runtime and the registry, which run in-process: the
record store on disk (with fsync), the write-through cache and the pull manager.

Every decision is printed with the step that made it. The step comes from the
pull manager's explanation of its own decision (a dry run of the same code, which
writes nothing), and is checked at run time against the answer, the credential
lookup and the record write of the real check; if they ever disagree the demo
stops with exit status 2.

Needs no root, no socket and no network. --kubelet-dir is ignored: use --dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.keep, "keep", false, "keep the kubelet directory (its path is printed) for the other commands")
	f.StringVar(&o.dir, "dir", "", "use this kubelet directory (created if missing, kept) instead of a temporary one")
	f.BoolVar(&o.noTiming, "no-timing", false, "do not print the elapsed time (for reproducible output)")
	return cmd
}

func runDemo(cmd *cobra.Command, g *globalOptions, o *demoOptions) error {
	f, err := parseFormat(g.output)
	if err != nil {
		return err
	}
	dir := o.dir
	keep := o.keep || o.dir != ""
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pullrecords-demo-"); err != nil {
			return fmt.Errorf("cannot create a temporary directory: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
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
		fmt.Fprintln(g.stdout, "pullrecords demo: a multi-tenant node, policy NeverVerifyPreloadedImages")
		fmt.Fprintln(g.stdout, "Each pod start shows the pull manager's decision and the step of its decision order that made it.")
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

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/fsstore"
)

type migrateOptions struct {
	apply bool
}

type migrateOutput struct {
	Files   []problemView `json:"files"`
	Applied bool          `json:"applied"`
	// Left counts old-version files still there after --apply (files that
	// fail to decode are never migrated; see fsck).
	Left int `json:"left"`
}

func newMigrateCmd(g *globalOptions) *cobra.Command {
	o := &migrateOptions{}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "List v1alpha1 record files to rewrite as v1beta1; --apply rewrites them (writes)",
		Long: `List the intent and record files written in kubelet.config.k8s.io/v1alpha1, which
a kubelet since v1.35 (and this module) rewrites as v1beta1. Dry run by default.

Without --apply nothing is written and no lock is taken. With --apply the store
is opened for writing as the kubelet opens it, taking the records' lock (stop the
kubelet first, then pass --kubelet-stopped if it is still detected): every readable v1alpha1 file is rewritten as v1beta1, with the
same bytes apart from the apiVersion, and stray temporary files are removed.
Files that do not decode are left alone; see "pullrecords fsck".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMigrate(cmd.Context(), g, o)
		},
	}
	cmd.Flags().BoolVar(&o.apply, "apply", false, "rewrite the files (writes)")
	addNoHeaders(cmd, g)
	return cmd
}

func oldVersionFiles(kubeletDir string) ([]problemView, error) {
	report, err := fsstore.Inspect(kubeletDir)
	if err != nil {
		return nil, describeFSError(err)
	}
	out := []problemView{}
	for _, p := range viewProblems(report) {
		if p.Problem == string(fsstore.ProblemOldVersion) {
			out = append(out, p)
		}
	}
	return out, nil
}

func runMigrate(ctx context.Context, g *globalOptions, o *migrateOptions) error {
	if err := checkKubeletDir(g.kubeletDir); err != nil {
		return err
	}
	if o.apply {
		if err := g.guardWrite(ctx, "migrate --apply"); err != nil {
			return err
		}
	}
	ok, err := hasStore(g.kubeletDir)
	if err != nil {
		return err
	}
	out := migrateOutput{Files: []problemView{}}
	prog := g.startProgress("migrate")
	defer prog.stop()
	if ok {
		prog.phase(checkingPhase(prog, g.kubeletDir, "looking for v1alpha1 files among"), 0)
		if out.Files, err = oldVersionFiles(g.kubeletDir); err != nil {
			return err
		}
	}
	if ok && o.apply && len(out.Files) > 0 {
		prog.phase("rewriting "+plural(len(out.Files), "file")+" as v1beta1", 0)
		store, err := g.openWritable("migrate --apply")
		if err != nil {
			return err
		}
		if err := store.Close(); err != nil {
			return err
		}
		out.Applied = true
		prog.phase(checkingPhase(prog, g.kubeletDir, "checking again"), 0)
		left, err := oldVersionFiles(g.kubeletDir)
		if err != nil {
			return err
		}
		out.Left = len(left)
	}
	prog.stop()
	s := g.style()
	return g.emit(out, func(w io.Writer) error {
		if len(out.Files) > 0 {
			t := newTable(
				column{header: "DIR"},
				column{header: "NAME", hex: true, fit: fitMiddle, min: 20},
				column{header: "KIND"},
				column{header: "VERSION"},
				column{header: "KEY", hex: true, fit: fitMiddle, min: 20},
			)
			for _, f := range out.Files {
				t.add(f.Dir, f.Name, f.Kind, f.Version, f.Key)
			}
			if err := t.write(w, s); err != nil {
				return err
			}
		}
		if s.noHeaders {
			return nil
		}
		if len(out.Files) > 0 {
			fmt.Fprintln(w)
		}
		switch {
		case len(out.Files) == 0:
			fmt.Fprintln(w, "nothing to migrate: every readable file is v1beta1")
		case out.Applied:
			fmt.Fprintf(w, "rewrote %s as v1beta1 (%d left)\n", plural(len(out.Files)-out.Left, "file"), out.Left)
		default:
			fmt.Fprintf(w, "%s would be rewritten as v1beta1 (dry run; use --apply, with the kubelet stopped)\n", plural(len(out.Files), "file"))
		}
		return nil
	})
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
)

type fsckOptions struct {
	repair bool
}

// problemView is one problem as printed.
type problemView struct {
	Dir     string `json:"dir"`
	Name    string `json:"name"`
	Problem string `json:"problem"`
	Kind    string `json:"kind,omitempty"`
	Version string `json:"version,omitempty"`
	Key     string `json:"key,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

type fsckOutput struct {
	Intents  int           `json:"intents"`
	Records  int           `json:"records"`
	Problems []problemView `json:"problems"`
	// Repaired lists entries moved to quarantine by --repair.
	Repaired []string `json:"quarantined,omitempty"`
	// Remaining lists problems left after --repair.
	Remaining []problemView `json:"remaining,omitempty"`
	// Actions says what --repair did, entry by entry.
	Actions []repairAction `json:"actions,omitempty"`
	// RepairError is set when --repair failed partway.
	RepairError string `json:"repairError,omitempty"`
	// Rechecked is set when the store was inspected again after --repair.
	Rechecked bool `json:"-"`
}

func newFsckCmd(g *globalOptions) *cobra.Command {
	o := &fsckOptions{}
	cmd := &cobra.Command{
		Use:   "fsck",
		Short: "Check every record file; --repair fixes what it can (writes)",
		Long: `Check every file under <kubelet dir>/image_manager/{pulling,pulled}: it decodes
strictly, its name is the hash of the key it holds, it is of the right kind for
its directory, it is a regular file with mode 0600, it is not a leftover temporary
file or a foreign file, and it is written in the current version (v1beta1).

Without --repair nothing is written and no lock is taken. With --repair (stop
the kubelet first, then pass --kubelet-stopped if it is still detected), broken
and foreign entries are moved to image_manager/quarantine, temporary files are
removed, v1alpha1 files are rewritten as v1beta1 and modes are reset; the table
and every change made are printed even when the repair fails partway.

A repair never turns a "must pull" into "may use". An entry a check reads as an
error (corrupt, oversized, wrong kind, not a regular file) makes every check for
its image answer "must pull"; its key cannot be told from its name, and removing
it would make a present image look preloaded. So --repair moves it to quarantine
and, in the same atomic step, leaves a fail-safe placeholder under its name
(problem Placeholder), which reads as corrupt until the kubelet next pulls that
image and rewrites the file. Placeholders are listed but not counted as problems.

Exit status: 0 clean (or clean after --repair), 1 problems found (or left after
--repair), 2 could not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFsck(cmd.Context(), g, o)
		},
	}
	cmd.Flags().BoolVar(&o.repair, "repair", false, "quarantine broken files (leaving fail-safe placeholders), remove temporary files, migrate old versions, fix modes (writes)")
	addNoHeaders(cmd, g)
	return cmd
}

func viewProblems(r *fsstore.Report) []problemView {
	out := []problemView{}
	for _, f := range r.Files {
		v := problemView{Dir: f.Dir, Name: f.Name, Problem: string(f.Problem), Kind: f.Kind, Version: f.Version, Key: f.Key}
		if err := f.Err; err != nil {
			// The path is in the row already: print the cause only.
			var ce *accessor.CorruptRecordError
			if errors.As(err, &ce) && ce.Err != nil {
				err = ce.Err
			}
			v.Detail = cleanDetail(err.Error())
		}
		if f.Problem == fsstore.ProblemKeyMismatch && f.Key != "" {
			v.Detail += " (holds " + f.Key + ")"
		}
		if f.Problem == fsstore.ProblemPlaceholder {
			v.Detail = "fail-safe: checks for this key answer must pull until the kubelet pulls the image again"
		}
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Dir != out[j].Dir {
			return out[i].Dir < out[j].Dir
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func runFsck(ctx context.Context, g *globalOptions, o *fsckOptions) error {
	if err := checkKubeletDir(g.kubeletDir); err != nil {
		return err
	}
	if o.repair {
		if err := g.guardWrite(ctx, "fsck --repair"); err != nil {
			return err
		}
	}
	ok, err := hasStore(g.kubeletDir)
	if err != nil {
		return err
	}
	out := fsckOutput{Problems: []problemView{}}
	// repairErr is reported after the output, which says what was done.
	var repairErr error
	prog := g.startProgress("fsck")
	defer prog.stop()
	emit := func() error {
		prog.stop()
		return g.emit(out, func(w io.Writer) error { return printFsck(w, out, o.repair, g.style()) })
	}
	if ok {
		prog.phase(checkingPhase(prog, g.kubeletDir, "checking"), 0)
		report, err := fsstore.Inspect(g.kubeletDir)
		if err != nil {
			return describeFSError(err)
		}
		out.Intents, out.Records = report.Intents, report.Records
		out.Problems = viewProblems(report)
		if o.repair && len(report.Files) > 0 {
			prog.phase("repairing "+plural(len(report.Files), "problem"), 0)
			moved, err := fsstore.Repair(g.logger(), g.kubeletDir, report)
			if errors.Is(err, fsstore.ErrLocked) {
				// Repair takes the lock first: nothing was done.
				return lockRefusal("fsck --repair", err)
			}
			if err != nil {
				repairErr = fmt.Errorf("fsck --repair: the repair failed partway (what it did is listed above): %w", describeFSError(err))
				out.RepairError = cleanDetail(err.Error())
			}
			out.Repaired = append([]string{}, moved...)
			sort.Strings(out.Repaired)
			prog.phase(checkingPhase(prog, g.kubeletDir, "checking again"), 0)
			after, err := fsstore.Inspect(g.kubeletDir)
			if err != nil {
				// Still say what was done before failing.
				out.Actions = repairActions(out.Problems, out.Repaired, nil)
				_ = emit()
				return errors.Join(repairErr, fmt.Errorf("checking again after the repair: %w", describeFSError(err)))
			}
			out.Remaining = viewProblems(after)
			out.Intents, out.Records = after.Intents, after.Records
			out.Actions = repairActions(out.Problems, out.Repaired, out.Remaining)
			out.Rechecked = true
		}
	}
	if err := emit(); err != nil {
		return errors.Join(repairErr, err)
	}
	if repairErr != nil {
		return repairErr
	}
	left := countProblems(out.Problems)
	if o.repair {
		left = countProblems(out.Remaining)
	}
	if left > 0 {
		return fmt.Errorf("%w: %s", errProblemsFound, plural(left, "problem"))
	}
	return nil
}

// repairAction is one change --repair made to an entry ("dir/name"; "dir/"
// for a directory): quarantined, removed, rewritten or mode reset.
type repairAction struct {
	Entry  string `json:"entry"`
	Action string `json:"action"`
}

// repairActions tells, for each problem found, what the repair did: moved
// entries were quarantined; a problem gone afterwards was fixed the way
// Repair fixes its kind. remaining nil means it could not be checked again:
// only the moves are known.
func repairActions(found []problemView, moved []string, remaining []problemView) []repairAction {
	isMoved := map[string]bool{}
	for _, m := range moved {
		isMoved[m] = true
	}
	left := map[problemView]bool{}
	for _, p := range remaining {
		left[problemView{Dir: p.Dir, Name: p.Name, Problem: p.Problem}] = true
	}
	out := []repairAction{}
	for _, p := range found {
		entry := p.Dir + "/" + p.Name
		if isMoved[entry] {
			action := "quarantined"
			if left[problemView{Dir: p.Dir, Name: p.Name, Problem: string(fsstore.ProblemPlaceholder)}] {
				action = "quarantined, placeholder left"
			}
			out = append(out, repairAction{Entry: entry, Action: action})
			continue
		}
		if remaining == nil || left[problemView{Dir: p.Dir, Name: p.Name, Problem: p.Problem}] {
			continue
		}
		switch fsstore.Problem(p.Problem) {
		case fsstore.ProblemTempFile:
			out = append(out, repairAction{Entry: entry, Action: "removed"})
		case fsstore.ProblemOldVersion:
			out = append(out, repairAction{Entry: entry, Action: "rewritten"})
		case fsstore.ProblemBadMode:
			out = append(out, repairAction{Entry: entry, Action: "mode reset"})
		}
	}
	return out
}

// problemTable is the table of problems of fsck and migrate: the file name
// and the detail are shortened to fit.
func problemTable(problems []problemView) *table {
	t := newTable(
		column{header: "DIR"},
		// Wide enough for a temporary file's name with its hash
		// shortened: shortened twice, it would tell nothing.
		column{header: "NAME", hex: true, fit: fitMiddle, min: 42},
		column{header: "PROBLEM"},
		column{header: "DETAIL", hex: true, fit: fitEnd, min: 24},
	)
	for _, p := range problems {
		t.add(p.Dir, orDash(p.Name), p.Problem, detail(p))
	}
	return t
}

func printFsck(w io.Writer, out fsckOutput, repair bool, s tableStyle) error {
	if len(out.Problems) > 0 {
		if err := problemTable(out.Problems).write(w, s); err != nil {
			return err
		}
		if !s.noHeaders || repair {
			fmt.Fprintln(w)
		}
	}
	if repair && len(out.Problems) > 0 {
		for _, a := range out.Actions {
			switch a.Action {
			case "rewritten":
				fmt.Fprintf(w, "rewrote %s as %s\n", esc(a.Entry), accessor.CurrentVersion)
			case "mode reset":
				fmt.Fprintf(w, "reset the mode of %s\n", esc(a.Entry))
			case "quarantined, placeholder left":
				fmt.Fprintf(w, "quarantined %s; a fail-safe placeholder keeps its name\n", esc(a.Entry))
			default:
				fmt.Fprintf(w, "%s %s\n", a.Action, esc(a.Entry))
			}
		}
		verdict := "repaired"
		if out.RepairError != "" {
			verdict = "repair failed partway"
		}
		left := "not checked again"
		if out.Rechecked {
			left = plural(countProblems(out.Remaining), "problem") + " left" + placeholderNote(out.Remaining)
		}
		fmt.Fprintf(w, "%s found; %s (%s quarantined); %s, %s readable; %s\n",
			plural(countProblems(out.Problems), "problem"), verdict, plural(len(out.Repaired), "entry"),
			plural(out.Intents, "intent"), plural(out.Records, "record"), left)
		return nil
	}
	if !s.noHeaders {
		fmt.Fprintf(w, "%s, %s readable; %s found%s\n", plural(out.Intents, "intent"), plural(out.Records, "record"),
			plural(countProblems(out.Problems), "problem"), placeholderNote(out.Problems))
	}
	return nil
}

// countProblems counts the problems in views, leaving out the fail-safe
// placeholders a repair left: they are there on purpose.
func countProblems(views []problemView) int {
	n := 0
	for _, v := range views {
		if v.Problem != string(fsstore.ProblemPlaceholder) {
			n++
		}
	}
	return n
}

// placeholderNote says how many fail-safe placeholders views lists, if any.
func placeholderNote(views []problemView) string {
	if n := len(views) - countProblems(views); n > 0 {
		return "; " + plural(n, "fail-safe placeholder") + " kept"
	}
	return ""
}

// checkingPhase is the progress message for a pass over the records,
// counting the entries only when a progress line is shown.
func checkingPhase(p *workProgress, kubeletDir, verb string) string {
	if p == nil {
		return verb
	}
	return verb + " " + plural(countEntries(kubeletDir), "entry") + " in " + fsstore.DirName + "/"
}

func detail(p problemView) string {
	switch {
	case p.Detail != "":
		return p.Detail
	case p.Version != "":
		return p.Kind + " " + p.Version + " " + p.Key
	default:
		return "-"
	}
}

// cleanDetail keeps an error on one table line and never echoes file
// content (a decoder error may quote the whole file, credential hashes
// included).
func cleanDetail(s string) string {
	if i := strings.Index(s, " in '{"); i >= 0 {
		s = s[:i] + " (content not shown)"
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

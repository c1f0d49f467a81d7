package main

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/accessor"
)

type lsOutput struct {
	Intents    []intentView `json:"intents"`
	Records    []recordView `json:"records"`
	Unreadable int          `json:"unreadable"`
}

func newLsCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List pull intents and pulled records (read-only)",
		Long: `List the pull intents (pulls in flight, or interrupted) and the pulled records
under <kubelet dir>/image_manager, with the credentials each record holds per image
name. The table fits 100 columns, shortening digests and long names ("…"); -o wide
prints every cell in full, -o json and -o yaml print everything exactly, full
credential hashes included. Files that cannot be read are counted and
reported on stderr; run "pullrecords fsck" for details.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := g.openReadOnly()
			if err != nil {
				return err
			}
			defer store.Close()
			out := lsOutput{Intents: []intentView{}, Records: []recordView{}}
			intents, ierr := store.ListImagePullIntents()
			records, rerr := store.ListImagePulledRecords()
			for _, err := range []error{ierr, rerr} {
				var le *accessor.ListError
				switch {
				case err == nil:
				case errors.As(err, &le):
					out.Unreadable += len(le.Errs)
				default:
					return err
				}
			}
			sort.Slice(intents, func(i, j int) bool { return intents[i].Image < intents[j].Image })
			sort.Slice(records, func(i, j int) bool { return records[i].ImageRef < records[j].ImageRef })
			for _, i := range intents {
				out.Intents = append(out.Intents, viewIntent(i))
			}
			for _, r := range records {
				out.Records = append(out.Records, viewRecord(r))
			}
			if out.Unreadable > 0 {
				fmt.Fprintf(g.stderr, "pullrecords: warning: %s could not be read; run \"pullrecords fsck\"\n", plural(out.Unreadable, "file"))
			}
			return g.emit(out, func(w io.Writer) error {
				return printLs(w, out, g.style())
			})
		},
	}
	addNoHeaders(cmd, g)
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func printLs(w io.Writer, out lsOutput, s tableStyle) error {
	t := newTable(
		column{header: "KIND"},
		column{header: "KEY", hex: true, fit: fitMiddle, min: 20},
		column{header: "NAMES", fit: fitMiddle, min: 16},
		column{header: "CREDENTIALS", fit: fitEnd, min: 16},
		column{header: "UPDATED"},
	)
	for _, i := range out.Intents {
		t.add("intent", i.Image, "-", "-", "-")
	}
	for _, r := range out.Records {
		t.add("record", r.ImageRef, r.namesCell(), r.credentialsCell(), orDash(r.LastUpdated))
	}
	if err := t.write(w, s); err != nil {
		return err
	}
	if !s.noHeaders {
		fmt.Fprintf(w, "\n%s, %s\n", plural(len(out.Intents), "intent"), plural(len(out.Records), "record"))
	}
	return nil
}

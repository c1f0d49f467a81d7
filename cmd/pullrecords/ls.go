package main

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
)

// lsOutput is what ls prints with -o json and -o yaml (written one element
// at a time, in the same bytes as the whole value would be).
type lsOutput struct {
	Intents    []intentView `json:"intents"`
	Records    []recordView `json:"records"`
	Unreadable int          `json:"unreadable"`
}

// Values of ls --sort.
const (
	sortByKey  = "key"
	sortByFile = "file"
)

type lsOptions struct {
	sort string
}

func newLsCmd(g *globalOptions) *cobra.Command {
	o := &lsOptions{}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List pull intents and pulled records (read-only)",
		Long: `List the pull intents (pulls in flight, or interrupted) and the pulled records
under <kubelet dir>/image_manager, with the credentials each record holds per image
name. The table fits 100 columns, shortening digests and long names ("…"); -o wide
prints every cell in full, -o json and -o yaml print everything exactly, full
credential hashes included. Files that cannot be read are counted and
reported on stderr; run "pullrecords fsck" for details.

Rows are sorted by key (image, imageRef) and printed as the files are read,
holding a few hundred records at a time however many there are: --sort key
(the default) reads every file twice, first for its key only; --sort file
prints in file-name order and reads every file once, the first rows at once.
Tables are laid out 512 rows at a time: past the first 512, a column widens
only when a row needs it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLs(g, o)
		},
	}
	enumFlag(cmd, false, &o.sort, "sort", "", sortByKey,
		"row order: key (image, imageRef) or file (file name: one read per file, first rows at once)",
		sortByKey, sortByFile)
	addNoHeaders(cmd, g)
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

// recordWalker is the part of *fsstore.Store ls uses.
type recordWalker interface {
	WalkImagePullIntents(fsstore.WalkOrder, func(*accessor.ImagePullIntent, error) error) error
	WalkImagePulledRecords(fsstore.WalkOrder, func(*accessor.ImagePulledRecord, error) error) error
}

// lsSink prints what ls finds as it finds it.
type lsSink interface {
	intent(intentView) error
	// records ends the intents and starts the records.
	records() error
	record(recordView) error
	end(intents, records, unreadable int) error
}

func runLs(g *globalOptions, o *lsOptions) error {
	f, err := parseFormat(g.output)
	if err != nil {
		return err
	}
	store, err := g.openUnscanned()
	if err != nil {
		return err
	}
	defer store.Close()
	w := bufio.NewWriterSize(g.stdout, 64<<10)
	var sink lsSink
	switch f {
	case formatJSON:
		sink = newJSONLs(w)
	case formatYAML:
		sink = &yamlLs{w: w, list: newYAMLList(w, "intents")}
	default:
		sink = newTableLs(w, g.style())
	}
	order := fsstore.ByKey
	if o.sort == sortByFile {
		order = fsstore.ByFileName
	}
	var intents, records, unreadable int
	walker, ok := store.(recordWalker)
	if ok {
		err := walker.WalkImagePullIntents(order, func(in *accessor.ImagePullIntent, err error) error {
			if err != nil {
				unreadable++
				return nil
			}
			intents++
			return sink.intent(viewIntent(in))
		})
		if err != nil {
			return err
		}
	}
	if err := sink.records(); err != nil {
		return err
	}
	if ok {
		err := walker.WalkImagePulledRecords(order, func(r *accessor.ImagePulledRecord, err error) error {
			if err != nil {
				unreadable++
				return nil
			}
			records++
			return sink.record(viewRecord(r))
		})
		if err != nil {
			return err
		}
	}
	if err := sink.end(intents, records, unreadable); err != nil {
		return err
	}
	if unreadable > 0 {
		fmt.Fprintf(g.stderr, "pullrecords: warning: %s could not be read; run \"pullrecords fsck\"\n", plural(unreadable, "file"))
	}
	return nil
}

// tableLs prints the table: intents, then records, then a summary line.
type tableLs struct {
	w         *bufio.Writer
	t         *streamTable
	noHeaders bool
}

func newTableLs(w *bufio.Writer, s tableStyle) *tableLs {
	return &tableLs{w: w, noHeaders: s.noHeaders, t: newStreamTable(w, s,
		column{header: "KIND"},
		column{header: "KEY", hex: true, fit: fitMiddle, min: 20},
		column{header: "NAMES", fit: fitMiddle, min: 16},
		column{header: "CREDENTIALS", fit: fitEnd, min: 16},
		column{header: "UPDATED"},
	)}
}

func (l *tableLs) intent(i intentView) error { return l.t.add("intent", i.Image, "-", "-", "-") }

func (l *tableLs) records() error { return nil }

func (l *tableLs) record(r recordView) error {
	return l.t.add("record", r.ImageRef, r.namesCell(), r.credentialsCell(), orDash(r.LastUpdated))
}

func (l *tableLs) end(intents, records, _ int) error {
	if err := l.t.flush(); err != nil {
		return err
	}
	if !l.noHeaders {
		fmt.Fprintf(l.w, "\n%s, %s\n", plural(intents, "intent"), plural(records, "record"))
	}
	return l.w.Flush()
}

// jsonLs prints lsOutput as JSON, one element at a time.
type jsonLs struct{ o *jsonObject }

func newJSONLs(w *bufio.Writer) *jsonLs {
	l := &jsonLs{o: newJSONObject(w)}
	_ = l.o.beginList("intents")
	return l
}

func (l *jsonLs) intent(i intentView) error { return l.o.item(i) }

func (l *jsonLs) records() error {
	if err := l.o.endList(); err != nil {
		return err
	}
	return l.o.beginList("records")
}

func (l *jsonLs) record(r recordView) error { return l.o.item(r) }

func (l *jsonLs) end(_, _, unreadable int) error {
	if err := l.o.endList(); err != nil {
		return err
	}
	if err := l.o.value("unreadable", unreadable); err != nil {
		return err
	}
	return l.o.end()
}

// yamlLs prints lsOutput as YAML, one element at a time.
type yamlLs struct {
	w    *bufio.Writer
	list *yamlList
}

func (l *yamlLs) intent(i intentView) error { return l.list.item(i) }

func (l *yamlLs) records() error {
	if err := l.list.end(); err != nil {
		return err
	}
	l.list = newYAMLList(l.w, "records")
	return nil
}

func (l *yamlLs) record(r recordView) error { return l.list.item(r) }

func (l *yamlLs) end(_, _, unreadable int) error {
	if err := l.list.end(); err != nil {
		return err
	}
	if err := yamlValue(l.w, "unreadable", unreadable); err != nil {
		return err
	}
	return l.w.Flush()
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

type format string

const (
	formatTable format = "table"
	formatJSON  format = "json"
	formatYAML  format = "yaml"
)

func parseFormat(s string) (format, error) {
	switch f := format(strings.ToLower(s)); f {
	case formatTable, formatJSON, formatYAML:
		return f, nil
	default:
		return "", usageErrorf("-o %q: want table, json or yaml", s)
	}
}

// emit writes v as JSON or YAML, or calls table for the table format.
func (g *globalOptions) emit(v any, table func(w io.Writer) error) error {
	f, err := parseFormat(g.output)
	if err != nil {
		return err
	}
	switch f {
	case formatJSON:
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case formatYAML:
		data, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = g.stdout.Write(data)
		return err
	default:
		tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		if err := table(tw); err != nil {
			return err
		}
		return tw.Flush()
	}
}

// row writes tab-separated cells and a newline.
func row(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// enumValue is a string flag that takes one of a fixed set of values. A
// value outside the set is a usage error that lists the set; a value that
// differs from one of the set only in case is taken as that one.
type enumValue struct {
	target  *string
	allowed []string
}

func newEnumValue(target *string, def string, allowed ...string) *enumValue {
	*target = def
	return &enumValue{target: target, allowed: allowed}
}

func (e *enumValue) String() string { return *e.target }

func (e *enumValue) Type() string { return "string" }

func (e *enumValue) Set(s string) error {
	for _, a := range e.allowed {
		if strings.EqualFold(s, a) {
			*e.target = a
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(e.allowed, ", "))
}

// complete offers the set to shell completion.
func (e *enumValue) complete(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	out := []cobra.Completion{}
	for _, a := range e.allowed {
		if strings.HasPrefix(strings.ToLower(a), strings.ToLower(toComplete)) {
			out = append(out, a)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// enumFlag defines an enumValue flag on fs of cmd, with completion.
func enumFlag(cmd *cobra.Command, persistent bool, target *string, name, short, def, usage string, allowed ...string) {
	v := newEnumValue(target, def, allowed...)
	fs := cmd.Flags()
	if persistent {
		fs = cmd.PersistentFlags()
	}
	fs.VarP(v, name, short, usage+" (one of "+strings.Join(allowed, ", ")+")")
	_ = cmd.RegisterFlagCompletionFunc(name, v.complete)
}

// addNoHeaders defines --no-headers on a command that prints tables.
func addNoHeaders(cmd *cobra.Command, g *globalOptions) {
	cmd.Flags().BoolVar(&g.noHeaders, "no-headers", false,
		"table output: print the rows only, without the header row (and without the summary line of a list)")
}

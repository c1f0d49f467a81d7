package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/kubeletcheck"
)

const rootLong = `pullrecords inspects, explains and repairs the image pull records that enforce
"ensure secret pulled images" (KEP-2535) on a Kubernetes node: the files under
<kubelet dir>/image_manager/{pulling,pulled}.

Start with:  pullrecords demo

Commands are read-only unless their help says they write. Read-only commands
never take the records' lock and work beside a running kubelet. The writing
ones (fsck --repair, migrate --apply, prune) refuse while another process holds
the records' lock, and while a kubelet is seen running on this node unless
--kubelet-stopped says it is not: a stock kubelet reads the records only when
it starts, takes no lock, and would act on stale records.

Exit status:
  0  success (a "must pull" decision from explain is an answer, not an error)
  1  the command ran and found problems (fsck; failed work in cache run --once),
     or what was asked for does not exist (get of a record that is not there)
  2  the command could not run: bad flag or argument, missing directory,
     permission denied, unreachable socket or a socket that is not a CRI endpoint`

// globalOptions are the flags every command shares.
type globalOptions struct {
	kubeletDir string
	output     string
	verbosity  int
	// noHeaders is --no-headers of the commands that print tables.
	noHeaders bool

	// kubeletStopped asserts that no kubelet runs: it skips the
	// running-kubelet check of the writing commands.
	kubeletStopped bool
	// procRoot and healthzURL are where that check looks; procRootFrom
	// and healthzURLFrom name the flag or environment variable that set
	// them, for its errors.
	procRoot, procRootFrom     string
	healthzURL, healthzURLFrom string

	stdout io.Writer
	stderr io.Writer
}

// logger returns the logger for the library's components. At -v 0 only
// errors are shown; -v 1 and above show info messages up to that level.
func (g *globalOptions) logger() klog.Logger {
	l := klog.Background()
	if g.verbosity > 0 {
		return l
	}
	return logr.New(errorsOnly{l.GetSink()})
}

// errorsOnly drops info messages and keeps errors.
type errorsOnly struct{ logr.LogSink }

func (errorsOnly) Enabled(int) bool { return false }

func (e errorsOnly) WithValues(kv ...any) logr.LogSink {
	return errorsOnly{e.LogSink.WithValues(kv...)}
}

func (e errorsOnly) WithName(name string) logr.LogSink { return errorsOnly{e.LogSink.WithName(name)} }

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globalOptions{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "pullrecords",
		Short:         "Inspect and explain a node's image pull records",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without subcommand: print help.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := parseFormat(g.output); err != nil {
				return err
			}
			g.checkDefaultsFromEnv(cmd)
			return setVerbosity(g.verbosity)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w: %v", errUsage, err)
	})
	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeletDir, "kubelet-dir", "/var/lib/kubelet", "the kubelet root directory (records live in <dir>/image_manager)")
	enumFlag(root, true, &g.output, "output", "o", string(formatTable),
		"output format: table (fitted into 100 columns), wide (every cell in full), json or yaml (exact, nothing shortened)",
		outputFormats...)
	pf.IntVarP(&g.verbosity, "verbosity", "v", 0, "log verbosity (klog -v), logs go to stderr")
	pf.BoolVar(&g.kubeletStopped, "kubelet-stopped", false,
		"assert that no kubelet is running on this node: the writing commands (fsck --repair, migrate --apply, prune) then skip their running-kubelet check "+
			"(process scan and healthz probe) and trust this word alone; a stock kubelet reads the records only at start-up and would act on stale ones if they changed under it. "+
			"The records' lock is still honoured. Nothing else skips the check")
	pf.StringVar(&g.procRoot, "proc-root", defaultProcRoot,
		"the /proc the running-kubelet check scans for a process named kubelet (the host's /proc when run in a container; env "+envProcRoot+
			", empty means the default); the scan cannot be switched off: an empty, missing or unreadable proc root, or one that lists no process, is an error (exit status 2)")
	pf.StringVar(&g.healthzURL, "kubelet-healthz-url", kubeletcheck.DefaultHealthzURL,
		"the kubelet healthz endpoint the running-kubelet check also probes (env "+envHealthzURL+", empty means the default); "+
			"an explicitly empty --kubelet-healthz-url= skips the probe, never the process scan")

	root.AddCommand(
		newDemoCmd(g),
		newLsCmd(g),
		newGetCmd(g),
		newExplainCmd(g),
		newFsckCmd(g),
		newMigrateCmd(g),
		newPruneCmd(g),
		newCacheCmd(g),
		newControllerCmd(g),
		newAgentCmd(g),
		newShimCmd(g),
		newVersionCmd(g),
	)
	setVersionFlag(root)
	wrapArgs(root)
	return root
}

// Environment variables that set --proc-root and --kubelet-healthz-url when
// the flag is not given. An empty one means the default: a variable that
// looks unset must not switch the running-kubelet check off.
const (
	envProcRoot   = "PULLRECORDS_PROC_ROOT"
	envHealthzURL = "PULLRECORDS_KUBELET_HEALTHZ_URL"
)

// defaultProcRoot is --proc-root's default; tests point it at a fake /proc.
var defaultProcRoot = kubeletcheck.DefaultProcRoot

// checkDefaultsFromEnv applies the environment to the check's flags the user
// did not set, and records where each value came from for the check's
// errors. Empty variables are ignored. The help keeps showing the built-in
// defaults.
func (g *globalOptions) checkDefaultsFromEnv(cmd *cobra.Command) {
	g.procRootFrom, g.healthzURLFrom = "--proc-root", "--kubelet-healthz-url"
	if v := os.Getenv(envProcRoot); v != "" && !cmd.Flags().Changed("proc-root") {
		g.procRoot, g.procRootFrom = v, envProcRoot
	}
	if v := os.Getenv(envHealthzURL); v != "" && !cmd.Flags().Changed("kubelet-healthz-url") {
		g.healthzURL, g.healthzURLFrom = v, envHealthzURL
	}
}

// wrapArgs makes argument errors of c and its children usage errors, one
// line each: an unknown sub-command (with cobra's "Did you mean this?"
// suggestions after the line), an argument given to a command that takes
// none, or a wrong number of arguments.
func wrapArgs(c *cobra.Command) {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if check := c.Args; check != nil || c.HasSubCommands() {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if cmd.HasSubCommands() && len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			if check == nil {
				return nil
			}
			if err := check(cmd, args); err != nil {
				name := commandName(cmd)
				if strings.HasPrefix(err.Error(), "unknown command") && len(args) > 0 {
					// cobra.NoArgs says "unknown command" of a command
					// that has none.
					return usageErrorf("%s takes no arguments, got %q", name, args[0])
				}
				return usageErrorf("%s: %v", name, err)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// commandName is cmd's path without the program name ("cache apply"), or
// the program name for the root.
func commandName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Name()
	}
	p := cmd.CommandPath()
	if _, rest, ok := strings.Cut(p, " "); ok {
		return rest
	}
	return p
}

// unknownCommand is the error for a sub-command cmd does not have, with
// cobra's suggestions.
func unknownCommand(cmd *cobra.Command, arg string) error {
	var hint []string
	if s := cmd.SuggestionsFor(arg); len(s) > 0 {
		hint = append(hint, "Did you mean this?")
		for _, name := range s {
			hint = append(hint, "\t"+name)
		}
		hint = append(hint, "")
	}
	hint = append(hint, fmt.Sprintf("Run '%s --help' for the commands.", cmd.CommandPath()))
	return &hintedError{
		err:  usageErrorf("unknown command %q for %q", arg, cmd.CommandPath()),
		hint: hint,
	}
}

// setVerbosity sets klog's verbosity and sends its output to stderr.
func setVerbosity(v int) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(v)); err != nil {
		return fmt.Errorf("%w: -v: %v", errUsage, err)
	}
	return fs.Set("logtostderr", "true")
}

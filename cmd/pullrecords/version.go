package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// develVersion is the version the go command stamps on a binary built from a
// source tree (go build, go install ./cmd/pullrecords) rather than from a
// module version (go install ...@v1.2.3).
const develVersion = "(devel)"

// versionInfo is what "pullrecords version" prints.
type versionInfo struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// VCS is the commit the binary was built from, when the go command
	// recorded it (-buildvcs, on by default in a git checkout).
	VCS *vcsInfo `json:"vcs,omitempty"`
}

type vcsInfo struct {
	System   string `json:"system"`
	Revision string `json:"revision"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified"`
}

// readVersion reads the running binary's build information.
func readVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionFrom(bi)
}

// versionFrom turns build information (nil: none) into a versionInfo.
func versionFrom(bi *debug.BuildInfo) versionInfo {
	v := versionInfo{
		Module:    "github.com/pullrecords/pullrecords/cmd/pullrecords",
		Version:   "unknown",
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	v.Version = bi.Main.Version
	if v.Version == "" {
		// A test binary, or a build the go command did not stamp.
		v.Version = develVersion
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	var vcs vcsInfo
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs":
			vcs.System = s.Value
		case "vcs.revision":
			vcs.Revision = s.Value
		case "vcs.time":
			vcs.Time = s.Value
		case "vcs.modified":
			vcs.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		v.Platform = goos + "/" + goarch
	}
	if vcs.Revision != "" {
		if vcs.System == "" {
			vcs.System = "vcs"
		}
		v.VCS = &vcs
	}
	return v
}

// commit says which commit the binary was built from, or why that is not
// known.
func (v versionInfo) commit() string {
	switch {
	case v.VCS != nil:
		s := v.VCS.System + " " + v.VCS.Revision
		if v.VCS.Time != "" {
			s += ", " + v.VCS.Time
		}
		if v.VCS.Modified {
			s += ", modified (uncommitted changes)"
		}
		return s
	case v.Version != develVersion && v.Version != "unknown":
		return "not recorded (built from the module version " + v.Version + ")"
	default:
		return "not recorded (built with -buildvcs=false or outside a git checkout)"
	}
}

// short is the line --version prints.
func (v versionInfo) short() string {
	s := "pullrecords " + v.Version
	if v.VCS != nil {
		rev := v.VCS.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += ", commit " + rev
		if v.VCS.Modified {
			s += " (modified)"
		}
	} else if v.Version == develVersion || v.Version == "unknown" {
		s += ", commit not recorded"
	}
	return s + ", " + v.GoVersion + " " + v.Platform
}

func (v versionInfo) print(w io.Writer) {
	version := v.Version
	switch version {
	case develVersion:
		version += ": built from a source tree, not a released module version"
	case "unknown":
		version += ": the binary carries no build information"
	}
	fmt.Fprintf(w, "pullrecords %s\n", esc(v.Version))
	row(w, "module:", v.Module)
	row(w, "version:", version)
	row(w, "commit:", v.commit())
	row(w, "go:", v.GoVersion+" "+v.Platform)
}

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the commit the command was built from",
		Long: `Print the module version of this binary, the commit it was built from and the Go
version, from the build information the go command stamps into it. Built in a git
checkout, a binary carries its commit and a pseudo-version (v0.0.0-TIME-COMMIT,
"+dirty" with uncommitted changes); built with -buildvcs=false or outside a
checkout it has version (devel) and no commit. "pullrecords --version" prints
the same in one line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion()
			return g.emit(v, func(w io.Writer) error {
				v.print(w)
				return nil
			})
		},
	}
}

// versionTemplate makes --version print versionInfo.short.
const versionTemplate = "{{.Version}}\n"

func setVersionFlag(root *cobra.Command) {
	root.Version = readVersion().short()
	root.SetVersionTemplate(versionTemplate)
}

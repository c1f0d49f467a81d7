package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionFrom(t *testing.T) {
	const mod = "github.com/pullrecords/pullrecords/cmd/pullrecords"
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name       string
		bi         *debug.BuildInfo
		short      string
		commitPart string
	}{
		{name: "no build info", bi: nil, short: "pullrecords unknown, commit not recorded, ", commitPart: "-buildvcs=false"},
		{name: "devel without vcs (-buildvcs=false)",
			bi:    &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "(devel)"}, Settings: settings("GOOS", "linux", "GOARCH", "amd64")},
			short: "pullrecords (devel), commit not recorded, go1.26.8 linux/amd64", commitPart: "not recorded (built with -buildvcs=false"},
		{name: "devel from a git checkout",
			bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "(devel)"}, Settings: settings(
				"GOOS", "linux", "GOARCH", "arm64", "vcs", "git", "vcs.revision", "3a3dce8a1b2c3d4e5f60718293a4b5c6d7e8f901",
				"vcs.time", "2026-03-02T09:00:00Z", "vcs.modified", "true")},
			short:      "pullrecords (devel), commit 3a3dce8a1b2c (modified), go1.26.8 linux/arm64",
			commitPart: "git 3a3dce8a1b2c3d4e5f60718293a4b5c6d7e8f901, 2026-03-02T09:00:00Z, modified"},
		{name: "tagged module version",
			bi:    &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: mod, Version: "v0.3.0"}, Settings: settings("GOOS", "linux", "GOARCH", "amd64")},
			short: "pullrecords v0.3.0, go1.26.8 linux/amd64", commitPart: "built from the module version v0.3.0"},
		{name: "test binary", bi: &debug.BuildInfo{}, short: "pullrecords (devel), commit not recorded, ", commitPart: "not recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := versionFrom(tc.bi)
			if !strings.HasPrefix(v.short(), tc.short) {
				t.Errorf("short() = %q, want prefix %q", v.short(), tc.short)
			}
			if !strings.Contains(v.commit(), tc.commitPart) {
				t.Errorf("commit() = %q, want it to contain %q", v.commit(), tc.commitPart)
			}
			if v.Module != mod {
				t.Errorf("Module = %q", v.Module)
			}
		})
	}
}

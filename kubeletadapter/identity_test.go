package kubeletadapter

import (
	"runtime/debug"
	"testing"
)

// The start-up line names the library's version as the go command recorded
// it in the kubelet's binary.
func TestModuleVersion(t *testing.T) {
	dep := func(path, version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: path, Version: version, Replace: replace}
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build information", nil, "unknown"},
		{"a kubelet linking a tagged library", &debug.BuildInfo{Main: debug.Module{Path: "k8s.io/kubernetes"},
			Deps: []*debug.Module{dep("k8s.io/klog/v2", "v2.140.0", nil), dep(libraryModule, "v0.1.0", nil)}}, "v0.1.0"},
		{"replaced by a fork's own copy", &debug.BuildInfo{Main: debug.Module{Path: "k8s.io/kubernetes"},
			Deps: []*debug.Module{dep(libraryModule, "v0.1.0", dep("example.com/fork/pullrecords", "v0.1.1-fork", nil))}}, "v0.1.1-fork"},
		{"replaced by a directory", &debug.BuildInfo{Main: debug.Module{Path: "k8s.io/kubernetes"},
			Deps: []*debug.Module{dep(libraryModule, "v0.1.0", dep("../pullrecords", "", nil))}}, "v0.1.0"},
		{"the library's own repository", &debug.BuildInfo{Main: debug.Module{Path: libraryModule, Version: "(devel)"}}, "(devel)"},
		{"not linked", &debug.BuildInfo{Main: debug.Module{Path: "k8s.io/kubernetes"}}, "unknown"},
	} {
		if got := moduleVersion(tc.info, libraryModule); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

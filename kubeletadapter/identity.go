package kubeletadapter

import "runtime/debug"

// libraryModule is the module whose version the start-up line names.
const libraryModule = "github.com/pullrecords/pullrecords"

// libraryVersion is the version of the library module linked into this
// binary, from its build information.
func libraryVersion() string {
	info, _ := debug.ReadBuildInfo()
	return moduleVersion(info, libraryModule)
}

// moduleVersion is the version info records for module path: the main
// module's, a dependency's or its replacement's; "unknown" when info is nil
// or does not list it (a test binary records no dependencies).
func moduleVersion(info *debug.BuildInfo, path string) string {
	if info == nil {
		return "unknown"
	}
	if info.Main.Path == path {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path != path {
			continue
		}
		if d.Replace != nil && d.Replace.Version != "" {
			return d.Replace.Version
		}
		return d.Version
	}
	return "unknown"
}

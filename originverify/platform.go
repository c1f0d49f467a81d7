package originverify

import (
	"runtime"
	"slices"
)

// Platform is an OS and CPU architecture an image index may hold a
// manifest for. Variants (arm v7, v8) are not told apart: a node's runtime
// picks among them, and walking all of them costs only manifests.
type Platform struct{ OS, Architecture string }

// defaultPlatforms is the node's own platform.
func defaultPlatforms() []Platform {
	return []Platform{{OS: "linux", Architecture: runtime.GOARCH}}
}

// indexPlatform is the platform of an index's child as the index states it.
type indexPlatform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
}

// wanted tells whether a child with platform p is one the runtime would
// use: a child without a platform is (containerd takes it), else its OS
// and architecture must be one of platforms.
func wanted(p *indexPlatform, platforms []Platform) bool {
	if p == nil {
		return true
	}
	return slices.Contains(platforms, Platform{OS: p.OS, Architecture: p.Architecture})
}

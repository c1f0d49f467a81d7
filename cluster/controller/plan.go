package controller

import (
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// cacheKey is an ImageCache's namespace/name.
func cacheKey(ic *api.ImageCache) string { return ic.Namespace + "/" + ic.Name }

// purging reports whether the action of status st is a purge (running or
// done).
func purging(st api.ImageCacheStatus) bool { return st.Reason == api.ReasonImageCachePurge }

// purged reports whether the cache's latest action purged it and its spec
// has not changed since: a purged cache wants nothing on any node until it
// is updated or refreshed.
func purged(ic *api.ImageCache) bool {
	return purging(ic.Status) && ic.Status.ObservedGeneration == ic.Generation
}

// selectorMatches reports whether a cacheSpec entry's node selector selects
// node. An empty selector selects every node, as in kube-fledged.
func selectorMatches(sel map[string]string, node *corev1.Node) bool {
	return labels.SelectorFromSet(sel).Matches(labels.Set(node.Labels))
}

// imagesFor returns the images the cache wants on node, in spec order,
// without duplicates.
func imagesFor(ic *api.ImageCache, node *corev1.Node) []string {
	return specImages(ic, func(sel map[string]string) bool { return selectorMatches(sel, node) })
}

// specImages returns the distinct images of the cacheSpec entries whose
// node selector match accepts, in spec order, each trimmed of spaces
// (an empty one is no image). Every count of a cache's images goes
// through it, so that they all agree.
func specImages(ic *api.ImageCache, match func(selector map[string]string) bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, entry := range ic.Spec.CacheSpec {
		if !match(entry.NodeSelector) {
			continue
		}
		for _, img := range entry.Images {
			img = strings.TrimSpace(img)
			if img == "" || seen[img] {
				continue
			}
			seen[img] = true
			out = append(out, img)
		}
	}
	return out
}

// anyNode is the specImages filter that takes every entry.
func anyNode(map[string]string) bool { return true }

// alwaysPull reports whether the pre-pull of image must ignore presence, as
// kube-fledged does: an image tagged latest, or with neither tag nor digest,
// may have moved in the registry.
func alwaysPull(image string) bool {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return false // the kubelet refuses it (InvalidImageName): a result either way
	}
	if _, ok := named.(reference.Digested); ok {
		return false
	}
	tagged, ok := named.(reference.Tagged)
	return !ok || tagged.Tag() == "latest"
}

// canonical returns the fully qualified form of an image name
// (docker.io/library/busybox:1.36), or the string itself when it does not
// parse, so that spellings of one image compare equal.
func canonical(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image
	}
	return reference.TagNameOnly(named).String()
}

// presentInNodeStatus is the fallback presence check for nodes without an
// agent: an exact comparison of canonical names against the images the
// kubelet lists in the node's status. The kubelet lists at most
// nodeStatusMaxImages images (50 by default), so a miss only means "pull";
// never a substring test, unlike kube-fledged.
func presentInNodeStatus(node *corev1.Node, image string) bool {
	want := canonical(image)
	for _, img := range node.Status.Images {
		for _, name := range img.Names {
			if name == image || canonical(name) == want {
				return true
			}
		}
	}
	return false
}

package controller

import (
	"fmt"
	"sort"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// Size bounds. A node's NodeImages holds, for every (cache, image) pair
// admitted there, a spec entry with the cache's pull record, the agent's
// presence report, the controller's result and the managed fields of all
// three. Measured on a real API server (TestMeasureNodeImagesBytes): 1,372
// bytes per pair with a 44-byte image name and a 36-byte namespace/name,
// 2,068 bytes with 123 and 74 bytes, that is about pairFixedBytes plus
// pairBytesPerImageByte per byte of the image name and
// pairBytesPerCacheKeyByte per byte of the cache's namespace/name; a failed
// result adds its reason and message (at most maxResultMessage bytes).
const (
	// DefaultMaxImagesPerCache is the default bound on the distinct images
	// one ImageCache lists (all its cacheSpec entries together). A
	// kube-fledged cache with more is very rare: kube-fledged pulls each
	// image through a Job per node.
	DefaultMaxImagesPerCache = 1000
	// DefaultMaxCacheImagesPerNode is the default bound on the (cache,
	// image) entries admitted on one node: at the bound, with every pair a
	// failed result at standard lengths, a node's NodeImages stays under
	// nodeImagesBudget (800 KiB), well under 1 MiB and the API server's 1.5
	// MiB etcd request limit. A node rarely holds as many images: the
	// kubelet's image garbage collection removes unused ones.
	DefaultMaxCacheImagesPerNode = 360

	// Measured cost of one pair, rounded up (see above).
	pairFixedBytes           = 960
	pairBytesPerImageByte    = 7
	pairBytesPerCacheKeyByte = 4
	// A failed result's reason and message, with JSON escaping and their
	// managed fields.
	failedResultBytes = maxResultMessage + maxResultMessage/8 + 64
	// maxResultMessage bounds the message of a result written to a node.
	maxResultMessage = 512
	// Standard lengths: a pair whose image name and cache namespace/name
	// are at most this long counts as one entry against the node bound;
	// longer ones count as several (pairWeight).
	standardImageLen    = 64
	standardCacheKeyLen = 48
	// nodeImagesBudget is what DefaultMaxCacheImagesPerNode entries may
	// cost, leaving room for metadata, the agent's heartbeat and purges.
	nodeImagesBudget = 800 << 10
)

// maxFailuresListed bounds the failures an ImageCache's status lists in
// all (Config.FailuresPerImage bounds them per image); the rest are
// counted in FailuresOmitted. At 1 KiB a message at most, the status stays
// far under the API server's object limit even for a cache of
// MaxImagesPerCache images failing on every node.
const maxFailuresListed = 200

// Reasons of refused caches, in results and the cache's status.
const (
	ReasonCacheTooLarge  = "CacheTooLarge"
	ReasonNodeImageLimit = "NodeImageLimit"
)

// pairBytes is the worst-case size of one (cache, image) pair in a node's
// NodeImages, for an image name and cache namespace/name of these lengths.
func pairBytes(imageLen, cacheKeyLen int) int {
	return pairFixedBytes + pairBytesPerImageByte*imageLen + pairBytesPerCacheKeyByte*cacheKeyLen + failedResultBytes
}

// standardPairBytes is the size of a pair counted as one entry.
var standardPairBytes = pairBytes(standardImageLen, standardCacheKeyLen)

// pairWeight is how many entries of the node bound one pair counts as: one
// at standard lengths or shorter, more in proportion to its size beyond,
// so that the bound in entries is a bound in bytes whatever the names.
func pairWeight(image, cacheKey string) int {
	b := pairBytes(len(image), len(cacheKey))
	return (b + standardPairBytes - 1) / standardPairBytes
}

// distinctImages counts the distinct images an ImageCache lists across
// all its cacheSpec entries, as imagesFor would take them.
func distinctImages(ic *api.ImageCache) int { return len(specImages(ic, anyNode)) }

// tooLargeMessage is the status message of a cache over maxPerCache.
func tooLargeMessage(images, maxPerCache int) string {
	return fmt.Sprintf("Not cached: the cache lists %d distinct images, over the limit of %d images per ImageCache "+
		"(the controller's --max-images-per-cache). Split it into caches of at most %d images.", images, maxPerCache, maxPerCache)
}

// truncateMessage cuts s to at most n bytes on a rune boundary, marking the
// cut with an ellipsis that fits in the n bytes.
func truncateMessage(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// demand is what one cache wants on one node, in entries of the node
// bound.
type demand struct {
	key       string // namespace/name
	namespace string
	name      string
	created   time.Time
	weight    int
}

// nodeRefusal says why a cache is not admitted on a node.
type nodeRefusal struct {
	bound      int // the node bound, in entries
	total      int // what every cache on the node wants
	namespaces int // namespaces with caches on the node
	share      int // the cache's namespace's fair share
	nsDemand   int // what the namespace's caches want
	weight     int // what this cache wants
}

// admission is the outcome of admit on one node: admitted caches by key;
// the others, with their refusal.
type admission struct {
	admitted map[string]bool
	refused  map[string]nodeRefusal
}

// admit decides which caches' images a node's NodeImages holds, given
// every cache's demand there and the node's bound, by max-min fair shares
// across namespaces (tenants):
//   - When every demand fits, every cache is admitted.
//   - Otherwise each namespace gets a share: namespaces are served from the
//     smallest demand up, each getting the whole of its demand or an equal
//     part of what is left, whichever is less. So a namespace that wants at
//     most bound / (namespaces on the node) is always admitted whole, and
//     the biggest demands are the ones cut.
//   - Within a namespace whole caches are admitted, oldest first
//     (creation time, then name), each that still fits in the share.
//
// The admitted demands never sum to more than bound. The result depends
// only on the demands, never on the order they are given in.
func admit(ds []demand, bound int) admission {
	out := admission{admitted: map[string]bool{}, refused: map[string]nodeRefusal{}}
	total := 0
	byNS := map[string][]demand{}
	nsDemand := map[string]int{}
	for _, d := range ds {
		total += d.weight
		byNS[d.namespace] = append(byNS[d.namespace], d)
		nsDemand[d.namespace] += d.weight
	}
	if total <= bound {
		for _, d := range ds {
			out.admitted[d.key] = true
		}
		return out
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	sort.Slice(namespaces, func(i, j int) bool {
		a, b := namespaces[i], namespaces[j]
		if nsDemand[a] != nsDemand[b] {
			return nsDemand[a] < nsDemand[b]
		}
		return a < b
	})
	remaining := bound
	for i, ns := range namespaces {
		share := min(nsDemand[ns], remaining/(len(namespaces)-i))
		remaining -= share
		caches := byNS[ns]
		sort.Slice(caches, func(i, j int) bool {
			if !caches[i].created.Equal(caches[j].created) {
				return caches[i].created.Before(caches[j].created)
			}
			return caches[i].name < caches[j].name
		})
		used := 0
		for _, d := range caches {
			if used+d.weight <= share {
				used += d.weight
				out.admitted[d.key] = true
				continue
			}
			out.refused[d.key] = nodeRefusal{bound: bound, total: total, namespaces: len(namespaces),
				share: share, nsDemand: nsDemand[ns], weight: d.weight}
		}
	}
	return out
}

// msgNodeImageLimit is the result message of each (node, image) of a
// cache a node refuses; the cache's status message gives the numbers once
// (nodeRefusal.summary).
const msgNodeImageLimit = "not cached on this node: its caches want more images than the per-node limit, and this cache is over its namespace's fair share there (see the status message)"

// summary is the sentence a refused cache's status message gains: the
// numbers of one refusing node, how many nodes refuse, and the fix.
func (r nodeRefusal) summary(nodes int) string {
	return fmt.Sprintf("%d node(s) refused the cache (%s): on one, its caches want %d image entries, over the limit of %d per node "+
		"(the controller's --max-cache-images-per-node); shared fairly among the %d namespaces with caches there, "+
		"this namespace's share is %d entries, its caches want %d and this cache %d. "+
		"Make the cache smaller, narrow its nodeSelector, or ask for a higher limit.",
		nodes, ReasonNodeImageLimit, r.total, r.bound, r.namespaces, r.share, r.nsDemand, r.weight)
}

// nodeDemands returns the demand on node of every cache with an action (a
// batch) within maxPerCache: the images it lists for the node (imagesFor),
// which its spec entries or, for a purge, its results there would hold. A
// purged cache counts too: its purge results take the same room. memo
// carries what is the same on every node from one call to the next.
func nodeDemands(caches []*api.ImageCache, node *corev1.Node, maxPerCache int, memo *demandMemo) []demand {
	var ds []demand
	for _, ic := range caches {
		if ic.Status.Batch == "" || memo.distinct(ic) > maxPerCache {
			continue
		}
		if w := memo.weight(ic, node); w > 0 {
			ds = append(ds, demand{key: cacheKey(ic), namespace: ic.Namespace, name: ic.Name, created: ic.CreationTimestamp.Time, weight: w})
		}
	}
	return ds
}

// demandMemo remembers, for the caches of one sync, their distinct image
// counts and their weights by the set of cacheSpec entries that select a
// node: every node alike costs the selectors only, not the images.
type demandMemo struct {
	counts  map[string]int
	weights map[string]int
}

func newDemandMemo() *demandMemo {
	return &demandMemo{counts: map[string]int{}, weights: map[string]int{}}
}

func (m *demandMemo) distinct(ic *api.ImageCache) int {
	key := cacheKey(ic)
	n, ok := m.counts[key]
	if !ok {
		n = distinctImages(ic)
		m.counts[key] = n
	}
	return n
}

// weight is the cache's demand on node, in entries (pairWeight of each
// image imagesFor gives).
func (m *demandMemo) weight(ic *api.ImageCache, node *corev1.Node) int {
	key := []byte(cacheKey(ic))
	key = append(key, 0)
	matched := false
	for _, entry := range ic.Spec.CacheSpec {
		bit := byte('0')
		if selectorMatches(entry.NodeSelector, node) {
			bit, matched = '1', true
		}
		key = append(key, bit)
	}
	if !matched {
		return 0
	}
	if w, ok := m.weights[string(key)]; ok {
		return w
	}
	w := 0
	for _, img := range imagesFor(ic, node) {
		w += pairWeight(img, cacheKey(ic))
	}
	m.weights[string(key)] = w
	return w
}

// nodeAdmission decides the caches admitted on node (see admit).
func nodeAdmission(caches []*api.ImageCache, node *corev1.Node, maxPerCache, bound int, memo *demandMemo) admission {
	return admit(nodeDemands(caches, node, maxPerCache, memo), bound)
}

// ok reports whether the cache key is admitted; a cache with no demand on
// the node (nothing there, or no action yet) is not refused either.
func (a admission) ok(key string) bool {
	_, refused := a.refused[key]
	return !refused
}

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// syncNode brings one node's NodeImages object up to date: the spec lists
// what every cache wants there (and what to purge: images no cache wants
// any more), the status's results gain the results decided since the last
// write and lose those of caches that no longer exist. Pre-pull pods whose
// results it wrote are deleted after the write, never before.
func (c *Controller) syncNode(ctx context.Context, name string) (time.Duration, error) {
	logger := klog.FromContext(ctx).WithValues("node", name)
	ctx = klog.NewContext(ctx, logger)
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		// Its NodeImages goes with it (owner reference); nothing to pull there.
		c.mu.Lock()
		delete(c.pending, name)
		delete(c.records, name)
		c.mu.Unlock()
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	list, err := c.cacheView.list()
	if err != nil {
		return 0, err
	}
	caches := make(map[string]*api.ImageCache, len(list))
	for _, ic := range list {
		caches[cacheKey(ic)] = ic
	}
	// Only admitted caches are written here: that keeps the object bounded
	// (limits.go), whatever one tenant's caches ask for.
	adm := nodeAdmission(list, node, c.cfg.MaxImagesPerCache, c.cfg.MaxCacheImagesPerNode, newDemandMemo())
	held := func(ic *api.ImageCache) bool {
		return adm.ok(cacheKey(ic)) && distinctImages(ic) <= c.cfg.MaxImagesPerCache
	}
	want := map[string][]string{} // image -> caches
	for _, ic := range list {
		if purged(ic) || ic.Status.Batch == "" || !held(ic) {
			continue
		}
		for _, img := range imagesFor(ic, node) {
			want[img] = append(want[img], cacheKey(ic))
		}
	}
	ni := c.nodeImagesOf(name)
	records, used := c.nodeRecords(name, ni)
	spec := desiredSpec(ni, want, records, c.agentView(ni, c.cfg.Clock.Now()), func(image string, recs []api.PullRecord) bool {
		return answered(ni, caches, image, recs)
	})
	if ni == nil || !equality.Semantic.DeepEqual(normalizeSpec(ni.Spec), spec) {
		if err := c.applySpec(ctx, node.Name, node.UID, spec); err != nil {
			return 0, err
		}
	}
	c.forgetRecords(name, spec, used)

	written := c.dueResults(name)
	// A result stays while its cache is held here and still lists its
	// image for this node: results of images an update dropped would
	// otherwise pile up with every update, past the node's bound.
	listed := map[string]map[string]bool{}
	keep := func(ic *api.ImageCache, image string) bool {
		if !held(ic) {
			return false
		}
		key := cacheKey(ic)
		set, ok := listed[key]
		if !ok {
			set = map[string]bool{}
			for _, img := range imagesFor(ic, node) {
				set[img] = true
			}
			listed[key] = set
		}
		return set[image]
	}
	results := mergeResults(ni, written, caches, keep)
	var current []api.NodeResult
	if ni != nil {
		current = ni.Status.Results
	}
	if !equality.Semantic.DeepEqual(results, sortedResults(current)) {
		if err := c.writeResults(ctx, name, results); err != nil {
			return 0, err
		}
	}
	// Written: forget them and delete their pods.
	c.mu.Lock()
	for k, v := range written {
		if cur, ok := c.pending[name][k]; ok && cur.result == v.result {
			delete(c.pending[name], k)
		}
	}
	if len(c.pending[name]) == 0 {
		delete(c.pending, name)
	}
	c.mu.Unlock()
	remove := map[string]bool{}
	for _, v := range written {
		if v.from.remove {
			remove[v.from.key] = true
		}
	}
	for key := range remove {
		if err := c.deletePodNamed(ctx, key); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// desiredSpec computes the node's spec: images wanted by some cache (with
// those caches and every pull record of the image), and a purge list
// holding each image no cache wants that some cache's pre-pull pulled (its
// records with an image ID). An image every cache found present has no
// such record and is never purged. A purge entry stays, whether or not the
// node's agent is alive, until the agent has reported it done (gone, or
// kept for a final reason) for the spec that holds it and every cache
// whose purge action waits on it has its result written (answered); a
// removal the runtime refused, or one a container's use holds back, stays
// and is retried.
func desiredSpec(ni *api.NodeImages, want map[string][]string, records map[string][]api.PullRecord, agent agentView,
	answered func(image string, recs []api.PullRecord) bool) api.NodeImagesSpec {
	var spec api.NodeImagesSpec
	for img, caches := range want {
		sort.Strings(caches)
		spec.Images = append(spec.Images, api.NodeImage{Image: img, Caches: caches, Pulled: records[img]})
	}
	for img, recs := range records {
		if _, ok := want[img]; ok {
			continue
		}
		var pulled []api.PullRecord
		for _, r := range recs {
			if r.ImageRef != "" {
				pulled = append(pulled, r)
			}
		}
		if len(pulled) == 0 {
			continue // pulls in flight or failed: nothing to remove
		}
		if ni != nil && findImage(ni.Spec.Purge, img) != nil && purgeDone(agent, img) && answered(img, pulled) {
			continue
		}
		spec.Purge = append(spec.Purge, api.NodeImage{Image: img, Pulled: pulled})
	}
	return normalizeSpec(spec)
}

// purgeDone reports whether the agent has finished the purge of image for
// the current spec: gone, or kept for a final reason. An image in use by a
// container stays to purge: the agent removes it once no container uses it
// (a cache's own pre-pull pod keeps its container a while after deletion).
func purgeDone(agent agentView, image string) bool {
	if !agent.generationSeen() {
		return false
	}
	p, ok := agent.presence[image]
	return ok && p.RemoveError == "" && (!p.Present || (p.Kept != "" && p.Kept != api.KeptInUse))
}

// answered reports whether every existing cache whose current purge action
// covers image (it has a record in recs) has its result for image written
// on the node.
func answered(ni *api.NodeImages, caches map[string]*api.ImageCache, image string, recs []api.PullRecord) bool {
	for _, r := range recs {
		ic, ok := caches[r.Cache]
		if !ok || string(ic.UID) != r.CacheUID || ic.Status.Reason != api.ReasonImageCachePurge || ic.Status.Status != api.ActionStatusProcessing {
			continue
		}
		found := false
		if ni != nil {
			for _, res := range ni.Status.Results {
				if res.Cache == r.Cache && res.Image == image && res.CacheUID == r.CacheUID && res.Batch == ic.Status.Batch {
					found = true
					break
				}
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// nodeRecords returns the node's pull records by image: those in its spec
// (both lists) updated with those not yet written, and the unwritten ones
// it used. A record the spec already shows is forgotten from memory.
func (c *Controller) nodeRecords(node string, ni *api.NodeImages) (map[string][]api.PullRecord, map[recordKey]api.PullRecord) {
	by := map[recordKey]api.PullRecord{}
	if ni != nil {
		for _, list := range [][]api.NodeImage{ni.Spec.Images, ni.Spec.Purge} {
			for _, e := range list {
				for _, r := range e.Pulled {
					by[recordKey{e.Image, r.CacheUID}] = r
				}
			}
		}
	}
	used := map[recordKey]api.PullRecord{}
	c.mu.Lock()
	for k, r := range c.records[node] {
		if cur, ok := by[k]; ok && cur == r {
			delete(c.records[node], k)
			continue
		}
		by[k] = r
		used[k] = r
	}
	if len(c.records[node]) == 0 {
		delete(c.records, node)
	}
	c.mu.Unlock()
	out := map[string][]api.PullRecord{}
	for k, r := range by {
		out[k.image] = append(out[k.image], r)
	}
	return out, used
}

// forgetRecords drops the unwritten records this sync used that the spec
// does not hold (pulls of images no cache wants that removed nothing).
// Records added or changed meanwhile (a pod created or finished during
// the sync) stay for the next sync.
func (c *Controller) forgetRecords(node string, spec api.NodeImagesSpec, used map[recordKey]api.PullRecord) {
	held := map[recordKey]bool{}
	for _, list := range [][]api.NodeImage{spec.Images, spec.Purge} {
		for _, e := range list {
			for _, r := range e.Pulled {
				held[recordKey{e.Image, r.CacheUID}] = true
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, r := range used {
		if cur, ok := c.records[node][k]; ok && cur == r && !held[k] {
			delete(c.records[node], k)
		}
	}
	if len(c.records[node]) == 0 {
		delete(c.records, node)
	}
}

func normalizeSpec(s api.NodeImagesSpec) api.NodeImagesSpec {
	for _, l := range []*[]api.NodeImage{&s.Images, &s.Purge} {
		sort.Slice(*l, func(i, j int) bool { return (*l)[i].Image < (*l)[j].Image })
		if len(*l) == 0 {
			*l = nil
		}
		for i := range *l {
			p := append([]api.PullRecord(nil), (*l)[i].Pulled...)
			sort.Slice(p, func(a, b int) bool { return p[a].CacheUID < p[b].CacheUID })
			if len(p) == 0 {
				p = nil
			}
			(*l)[i].Pulled = p
		}
	}
	return s
}

// mergeResults is the node's result list after this write: the written
// results of existing caches (same UID) the node holds, updated with the
// pending ones, each kept only if keep says so (a cache refused on the
// node, or an image its cache no longer lists there, has none).
func mergeResults(ni *api.NodeImages, pend map[resultKey]pendingResult, caches map[string]*api.ImageCache, keep func(*api.ImageCache, string) bool) []api.NodeResult {
	by := map[resultKey]api.NodeResult{}
	if ni != nil {
		for _, r := range ni.Status.Results {
			by[resultKey{r.Cache, r.Image}] = r
		}
	}
	for k, p := range pend {
		by[k] = p.result
	}
	out := make([]api.NodeResult, 0, len(by))
	for _, r := range by {
		ic, ok := caches[r.Cache]
		if !ok || string(ic.UID) != r.CacheUID || !keep(ic, r.Image) {
			continue
		}
		out = append(out, r)
	}
	return sortedResults(out)
}

func sortedResults(rs []api.NodeResult) []api.NodeResult {
	out := append([]api.NodeResult(nil), rs...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cache != out[j].Cache {
			return out[i].Cache < out[j].Cache
		}
		return out[i].Image < out[j].Image
	})
	if len(out) == 0 {
		return nil
	}
	// Times round-trip through RFC 3339 at second precision.
	for i := range out {
		out[i].Time = metav1.NewTime(out[i].Time.Rfc3339Copy().Time)
	}
	return out
}

// applySpec creates or updates the node's object with server-side apply:
// the controller owns the spec and the owner reference to the Node.
func (c *Controller) applySpec(ctx context.Context, node string, uid types.UID, spec api.NodeImagesSpec) error {
	obj := map[string]any{
		"apiVersion": api.NodeImagesKind.GroupVersion().String(),
		"kind":       api.NodeImagesKind.Kind,
		"metadata": map[string]any{
			"name": node,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Node", "name": node, "uid": string(uid),
			}},
		},
		"spec": specMap(spec),
	}
	return c.apply(ctx, node, obj)
}

func specMap(spec api.NodeImagesSpec) map[string]any {
	list := func(l []api.NodeImage) []any {
		out := []any{}
		for _, i := range l {
			m := map[string]any{"image": i.Image}
			if len(i.Caches) > 0 {
				caches := make([]any, len(i.Caches))
				for j, c := range i.Caches {
					caches[j] = c
				}
				m["caches"] = caches
			}
			if len(i.Pulled) > 0 {
				pulled := make([]any, len(i.Pulled))
				for j, r := range i.Pulled {
					rec := map[string]any{"cache": r.Cache, "cacheUID": r.CacheUID}
					if r.Batch != "" {
						rec["batch"] = r.Batch
					}
					if r.ImageRef != "" {
						rec["imageRef"] = r.ImageRef
					}
					pulled[j] = rec
				}
				m["pulled"] = pulled
			}
			out = append(out, m)
		}
		return out
	}
	return map[string]any{"images": list(spec.Images), "purge": list(spec.Purge)}
}

// writeResults replaces the node's result list, which only the
// controller writes, with a JSON merge patch of the status: the agent's
// fields are not in the patch and stay as they are. (A merge patch costs
// the API server less than a server-side apply; at one write per node per
// round that matters.)
func (c *Controller) writeResults(ctx context.Context, node string, results []api.NodeResult) error {
	list := results
	if list == nil {
		list = []api.NodeResult{}
	}
	data, err := json.Marshal(map[string]any{"status": map[string]any{"results": list}})
	if err != nil {
		return err
	}
	_, err = c.cfg.Dynamic.Resource(api.NodeImagesResource).Patch(ctx, node, types.MergePatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if err != nil {
		return fmt.Errorf("writing the results of NodeImages %s: %w", node, err)
	}
	return nil
}

func (c *Controller) apply(ctx context.Context, node string, obj map[string]any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = c.cfg.Dynamic.Resource(api.NodeImagesResource).Patch(ctx, node, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)})
	if err != nil {
		return fmt.Errorf("applying the spec of NodeImages %s: %w", node, err)
	}
	return nil
}

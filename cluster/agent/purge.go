package agent

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/distribution/reference"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// Why the agent keeps a purge image (api.Kept*); the controller quotes
// them in the purge's results ("kept: ...").
const (
	keptByCache      = api.KeptByCache
	keptPinned       = api.KeptPinned
	keptInUse        = api.KeptInUse
	keptNoRecord     = api.KeptNoRecord
	keptOtherTagsFmt = api.KeptOtherTags + " (%s)"
)

// purgeRound is one round's removals. Every check is made on the node,
// against the runtime, right before RemoveImage, and compares image IDs:
// the purge entry's recorded pulls (PullRecord.ImageRef) are resolved to the
// runtime's image, and that image is removed, by ID, only when
//   - no spec.images reference resolves to it (every spelling and tag of
//     what another cache keeps),
//   - the runtime does not pin it,
//   - no container, in any state, uses it,
//   - it has no tag beyond those of this round's purge entries that
//     resolve to it (so another name on the node, which something else
//     pulled, keeps it).
type purgeRound struct {
	a      *Agent
	keep   map[string]bool            // image IDs spec.images resolves to
	inUse  map[string]bool            // image IDs containers use; nil until asked
	images map[string]*GuardImage     // ID -> image, for this round
	names  map[string]map[string]bool // ID -> canonical purge names that resolve to it
	// resolved[i] are the IDs purge entry i resolves to.
	resolved [][]string
	errs     []string // per entry: a resolution error, if any (the entry waits)
}

// purge handles obj's purge entries (those spec.images does not also name:
// keeping wins) and returns their presence reports, in spec order. keep
// holds the IDs the spec's wanted images resolve to. An error means the
// runtime is unreachable.
func (a *Agent) purge(ctx context.Context, entries []api.NodeImage, keep map[string]bool) ([]api.ImagePresence, error) {
	r := &purgeRound{a: a, keep: keep, images: map[string]*GuardImage{}, names: map[string]map[string]bool{}}
	r.resolved = make([][]string, len(entries))
	r.errs = make([]string, len(entries))
	for i, e := range entries {
		for _, ref := range recordedRefs(e) {
			img, err := a.guard.Image(ctx, ref)
			if err != nil {
				if unreachable(err) {
					return nil, err
				}
				r.errs[i] = err.Error()
				continue
			}
			if img == nil || slices.Contains(r.resolved[i], img.ID) {
				continue
			}
			r.images[img.ID] = img
			r.resolved[i] = append(r.resolved[i], img.ID)
			if r.names[img.ID] == nil {
				r.names[img.ID] = map[string]bool{}
			}
			r.names[img.ID][canonicalName(e.Image)] = true
		}
	}
	out := make([]api.ImagePresence, 0, len(entries))
	for i, e := range entries {
		if r.errs[i] != "" {
			// What the entry names is unknown this round: nothing of it is
			// removed, and it is left out of the report (never "gone").
			klog.FromContext(ctx).Error(nil, "Purge image status unknown this round; left out of the report", "image", e.Image, "err", r.errs[i])
			continue
		}
		p, err := r.entry(ctx, i, e)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// entry removes what entry i recorded, unless a check keeps it, and
// reports the outcome.
func (r *purgeRound) entry(ctx context.Context, i int, e api.NodeImage) (api.ImagePresence, error) {
	logger := klog.FromContext(ctx).WithValues("image", e.Image)
	a := r.a
	p := api.ImagePresence{Image: e.Image}
	if len(recordedRefs(e)) == 0 {
		// Nothing says a cache pulled it: never removed. Presence by name,
		// so the report is honest.
		q, err := a.presence(ctx, e.Image)
		if err != nil {
			return p, err
		}
		q.Kept = keptNoRecord
		a.metrics.purged(outcomeKept)
		return q, nil
	}
	var removeErr string
	for _, id := range r.resolved[i] {
		kept, err := r.why(ctx, id)
		if err != nil {
			if unreachable(err) {
				return p, err
			}
			removeErr = err.Error()
			kept = ""
			p.Present, p.ImageRef = true, nonEmptyFirst(p.ImageRef, id)
			continue
		}
		if kept != "" {
			logger.V(2).Info("Keeping purge image", "imageID", id, "why", kept)
			a.metrics.purged(outcomeKept)
			p.Present, p.ImageRef, p.Kept = true, nonEmptyFirst(p.ImageRef, id), nonEmptyFirst(p.Kept, kept)
			continue
		}
		if err := a.rt.RemoveImage(ctx, id); err != nil {
			if unreachable(err) {
				return p, err
			}
			logger.Error(err, "Removing image failed", "imageID", id)
			a.metrics.purged(outcomeFailed)
			removeErr = err.Error()
		} else {
			logger.Info("Removed image", "imageID", id)
			a.metrics.purged(outcomeRemoved)
		}
		still, err := a.guard.Image(ctx, id)
		if err != nil {
			if unreachable(err) {
				return p, err
			}
			removeErr = err.Error()
			still = &GuardImage{ID: id}
		}
		if still != nil {
			p.Present, p.ImageRef = true, nonEmptyFirst(p.ImageRef, id)
		}
	}
	if !p.Present {
		removeErr = "" // gone: nothing (left) to remove
	}
	if removeErr != "" {
		a.removeErrors[e.Image] = removeErr
	} else {
		delete(a.removeErrors, e.Image)
	}
	p.RemoveError = a.removeErrors[e.Image]
	return p, nil
}

// why returns why image id must stay ("" when it may go).
func (r *purgeRound) why(ctx context.Context, id string) (string, error) {
	img := r.images[id]
	switch {
	case r.keep[id]:
		return keptByCache, nil
	case img.Pinned:
		return keptPinned, nil
	}
	used, err := r.used(ctx)
	if err != nil {
		return "", err
	}
	if used[id] {
		return keptInUse, nil
	}
	var other []string
	for _, t := range img.RepoTags {
		if !r.names[id][canonicalName(t)] {
			other = append(other, t)
		}
	}
	if len(other) > 0 {
		sort.Strings(other)
		return fmt.Sprintf(keptOtherTagsFmt, strings.Join(other, ", ")), nil
	}
	return "", nil
}

// used returns the IDs of the images the node's containers use, asked once
// per round, right before the first removal: each name a container reports
// is resolved to the image it names now.
func (r *purgeRound) used(ctx context.Context) (map[string]bool, error) {
	if r.inUse != nil {
		return r.inUse, nil
	}
	names, err := r.a.guard.ContainerImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("checking the node's containers: %w", err)
	}
	used := map[string]bool{}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		used[n] = true // an image ID already
		img, err := r.a.guard.Image(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("checking the node's containers: %w", err)
		}
		if img != nil {
			used[img.ID] = true
		}
	}
	r.inUse = used
	return used, nil
}

// recordedRefs returns the distinct image references the entry's pull
// records name.
func recordedRefs(e api.NodeImage) []string {
	var out []string
	for _, rec := range e.Pulled {
		if rec.ImageRef != "" && !slices.Contains(out, rec.ImageRef) {
			out = append(out, rec.ImageRef)
		}
	}
	return out
}

// canonicalName is the fully qualified form of a name
// (docker.io/library/busybox:1.36), as runtimes report tags, or the name
// itself when it does not parse.
func canonicalName(name string) string {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return name
	}
	return reference.TagNameOnly(named).String()
}

func nonEmptyFirst(cur, next string) string {
	if cur != "" {
		return cur
	}
	return next
}

package controller

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// tally counts an action's results into the status kube-fledged users
// read, as a sync decides them one (node, image) at a time. It keeps what
// the status shows and nothing more: the counts, the first failures of
// each image (perImage at most; a sync visits nodes in name order, so these
// are the failures of the first nodes by name), and a purge's reasons for
// keeping images. Its memory grows with the images that failed, not with
// nodes × images.
type tally struct {
	perImage int
	counts   api.ResultCounts
	failures map[string]api.NodeReasonMessageList
	omitted  int
	removed  int            // purge: images removed
	kept     map[string]int // purge: why images stay -> how many
}

func newTally(perImage int) *tally { return &tally{perImage: perImage} }

// add counts the final result o of image on node.
func (t *tally) add(node, image string, o api.Outcome) {
	switch o.Status {
	case api.WorkSucceeded:
		t.counts.Succeeded++
		t.keptBy(o)
	case api.WorkAlreadyPulled:
		t.counts.AlreadyPulled++
	case api.WorkFailed, api.WorkUnknown:
		if o.Status == api.WorkFailed {
			t.counts.Failed++
		} else {
			t.counts.Unknown++
		}
		if len(t.failures[image]) >= t.perImage {
			t.omitted++
			return
		}
		if t.failures == nil {
			t.failures = map[string]api.NodeReasonMessageList{}
		}
		t.failures[image] = append(t.failures[image], api.NodeReasonMessage{
			Node: node, Reason: o.Reason, Message: truncateMessage(o.Message, 1024)})
	}
}

// keptBy notes, for a purge's summary, whether a succeeded result removed
// its image or why it left it.
func (t *tally) keptBy(o api.Outcome) {
	if o.Reason == "" {
		t.removed++
		return
	}
	if t.kept == nil {
		t.kept = map[string]int{}
	}
	t.kept[keptText(o)]++
}

// done is how many results were counted.
func (t *tally) done() int {
	return int(t.counts.Succeeded + t.counts.AlreadyPulled + t.counts.Failed + t.counts.Unknown)
}

// status is the cache's status for an action of desired (node, image)
// pairs with inFlight of them in pre-pull pods and unwritten results not
// yet on their nodes' objects: Processing until every pair has a result
// written, then Succeeded, Failed (any failed or unknown result, listed
// under its image with node, reason and message: at most perImage per
// image and maxFailuresListed in all, by image name, the rest counted as
// omitted) or NoImagesPulledOrDeleted (nothing to do).
func (t *tally) status(ic *api.ImageCache, desired, inFlight, unwritten int) api.ImageCacheStatus {
	st := ic.Status
	counts := t.counts
	counts.Desired, counts.InFlight = int32(desired), int32(inFlight)
	counts.FailuresOmitted = int32(t.omitted)
	st.Failures = nil
	if len(t.failures) > 0 {
		images := make([]string, 0, len(t.failures))
		for img := range t.failures {
			images = append(images, img)
		}
		sort.Strings(images)
		st.Failures = make(map[string]api.NodeReasonMessageList, len(images))
		room := maxFailuresListed
		for _, img := range images {
			list := t.failures[img]
			n := min(len(list), room)
			counts.FailuresOmitted += int32(len(list) - n)
			if n > 0 {
				st.Failures[img] = list[:n:n]
				room -= n
			}
		}
	}
	st.Counts = &counts
	failed := counts.Failed+counts.Unknown > 0
	purge := purging(st)
	switch {
	case t.done() < desired || unwritten > 0:
		st.Status = api.ActionStatusProcessing
		st.Message = processingMessages[st.Reason]
		st.CompletionTime = nil
	case desired == 0:
		st.Status = api.ActionStatusNoImagesPulledOrDeleted
		st.Message = noRequestsMessage(ic)
	case failed && purge:
		st.Status = api.ActionStatusFailed
		st.Message = "Some images could not be removed from some nodes; see failures."
	case failed:
		st.Status = api.ActionStatusFailed
		st.Message = "Some images could not be pulled on some nodes; see failures."
	case purge:
		st.Status = api.ActionStatusSucceeded
		st.Message = purgeSummary(t.removed, t.kept)
	default:
		st.Status = api.ActionStatusSucceeded
		st.Message = "Every image of the cache is on every selected node."
	}
	return st
}

// countsText is the counts as an Event and a log line say them.
func countsText(n *api.ResultCounts) string {
	if n == nil {
		return ""
	}
	return fmt.Sprintf("%d pulled, %d already present, %d failed, %d unknown, %d skipped of %d", n.Succeeded, n.AlreadyPulled, n.Failed, n.Unknown, n.Skipped, n.Desired)
}

var processingMessages = map[string]string{
	api.ReasonImageCacheCreate:  "Images are being pulled on the selected nodes; the status shows the outcome when every node has answered.",
	api.ReasonImageCacheUpdate:  "The cache's images are being updated on the selected nodes; the status shows the outcome when every node has answered.",
	api.ReasonImageCacheRefresh: "The cache is being refreshed on the selected nodes; the status shows the outcome when every node has answered.",
	api.ReasonImageCachePurge:   "The cache's images are being removed from the selected nodes; the status shows the outcome when every node has answered.",
}

// noRequestsMessage says why an action covered no (node, image): the cache
// lists no image at all, or no node matched the selectors of the entries
// that list some.
func noRequestsMessage(ic *api.ImageCache) string {
	for _, e := range ic.Spec.CacheSpec {
		for _, img := range e.Images {
			if strings.TrimSpace(img) != "" {
				return "No node matched the cache's node selectors, so no image was pulled or removed."
			}
		}
	}
	return "The cache lists no images, so no image was pulled or removed."
}

// keptText is why a purge left an image, as its summary counts it: the
// list of caches that keep it is left out, so that one reason counts once.
func keptText(o api.Outcome) string {
	if o.Reason == reasonKept && strings.HasPrefix(o.Message, "kept: another ImageCache keeps it") {
		return "kept: another ImageCache keeps it"
	}
	return o.Message
}

// purgeSummary is the final message of a purge: how many images were
// removed and why the others stay (keptText -> how many).
func purgeSummary(removed int, why map[string]int) string {
	if len(why) == 0 {
		return "Every image this cache pulled was removed from the selected nodes."
	}
	var parts []string
	for m, n := range why {
		parts = append(parts, fmt.Sprintf("%s (%d)", m, n))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d image(s) this cache pulled removed from the selected nodes; the others stay: %s.", removed, strings.Join(parts, "; "))
}

package kubeletadapter_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/kubernetes/pkg/kubelet/images"
)

// TestImageGCRepull drives upstream's real image manager (EnsureImageExists)
// through two image garbage collections that end, under upstream v1.37.2,
// with a private image present and no record, so that it looks preloaded and
// a pod of another namespace without credentials runs it with
// imagePullPolicy: Never. The library keeps the record (it re-lists the
// runtime and remembers pulls recorded since the collection began), so that
// pod gets ErrImageNeverPull. The upstream half of each case asserts the
// leak, so a fix upstream shows here.
func TestImageGCRepull(t *testing.T) {
	enableGate(t)
	var until time.Time
	var left []string
	// gcStart is the collector's start: its time, then its image list (the
	// images it kept), taken after it removed what it removed.
	gcStart := func(n *node) {
		until = time.Now().Add(2 * time.Second)
		left = n.rt.imageIDs()
	}
	hook := func(n *node) {
		var h images.PostImageGCHook = n.pm.PruneUnknownRecords
		h(n.ctx, left, until)
	}
	cases := []struct {
		name  string
		steps []step
	}{{
		name: "re-pull with the same secret between the collection and its hook",
		steps: []step{
			{name: "team pulls with its secret", pod: ifNotPresent("ns1", "a", privateImg, secretA)},
			{name: "collection removes the image", do: func(n *node) { n.rt.remove(privateImg); gcStart(n) }},
			{name: "team re-pulls with the same secret (record unchanged)", pod: ifNotPresent("ns1", "b", privateImg, secretA)},
			{name: "hook prunes with the list read before the re-pull", do: hook},
			{name: "other namespace, no credentials, Never", pod: never("ns2", "c", privateImg)},
		},
	}, {
		name: "image in use is not in the collector's list",
		steps: []step{
			{name: "team pulls with its secret", pod: ifNotPresent("ns1", "a", privateImg, secretA)},
			// The collector lists only eviction candidates; one in use by
			// a running container is never among them.
			{name: "collection keeps nothing it considered", do: func(n *node) { gcStart(n); left = nil }},
			{name: "hook prunes", do: hook},
			{name: "other namespace, no credentials, Never", pod: never("ns2", "c", privateImg)},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := scenario{name: tc.name, private: []string{privateReg}, steps: tc.steps}
			last := len(tc.steps) - 1
			up := play(t, sc, kubelet, kubelet)
			if got := up.Outcomes[last]; got.Err != "" || !strings.Contains(got.Message, "already present") {
				t.Errorf("upstream no longer runs the private image without credentials after the prune (fixed upstream? update pullmanager/doc.go): %+v", got)
			}
			lib := play(t, sc, library, library)
			got := lib.Outcomes[last]
			if !strings.Contains(got.Err, "ErrImageNeverPull") {
				t.Errorf("SECURITY: the library let a pod without credentials use a private image after the prune: %+v", got)
			}
			if recordFileOf(t, lib, privateImg) == "" {
				t.Errorf("the library lost the record of the present image; files: %v", keys(lib.Files))
			}
			if recordFileOf(t, up, privateImg) != "" {
				t.Errorf("upstream kept the record; the leak above has another cause: files %v", keys(up.Files))
			}
		})
	}
}

// recordFileOf returns the name of the pulled record file whose content
// mentions image's repository, or "".
func recordFileOf(t *testing.T, r run, image string) string {
	t.Helper()
	repo := image[:strings.LastIndex(image, ":")]
	for name, content := range r.Files {
		if strings.HasPrefix(name, "pulled/") && strings.Contains(content, repo) {
			return strings.TrimPrefix(name, "pulled/")
		}
	}
	return ""
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

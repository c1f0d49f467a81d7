package kubeletadapter_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
)

// TestMappingKeys: for each spelling of an image a pod may use, the key of
// the credential mapping entry a pull writes. The expected key is what the
// kubelet's own manager writes (read back from its record file); the
// library must write the same (kubelet v1.37.2 trims only the tag and digest
// off the raw string, without normalising it).
func TestMappingKeys(t *testing.T) {
	enableGate(t)
	spellings := []string{
		"busybox",
		"busybox:1.36",
		"busybox:latest",
		"library/busybox:1",
		"docker.io/busybox",
		"docker.io/library/busybox:1.36",
		"index.docker.io/library/busybox:1",
		"localhost:5000/x/y:1",
		"localhost:5000/x/y",
		"Registry.Example:443/team/app:v1",
		"busybox:1.36@sha256:" + digest1,
		"busybox@sha256:" + digest1,
		"registry.example/a/b/c@sha256:" + digest1,
	}
	hub := dockerSecret("ns1", "hub", "uid-hub", "docker.io", "pw")
	for _, image := range spellings {
		t.Run(image, func(t *testing.T) {
			keys := map[wiring][]string{}
			for _, w := range []wiring{kubelet, library} {
				dir := t.TempDir()
				n := newNode(t, w, dir, newFakeRuntime(), kubeletconfig.NeverVerifyPreloadedImages, nil)
				o := n.ensure("pull", pod{ns: "ns1", name: "a", image: image, policy: v1.PullIfNotPresent, secrets: []v1.Secret{hub}})
				if o.Err != "" {
					t.Fatalf("%s: pull failed: %s", w, o.Err)
				}
				keys[w] = mappingKeys(t, dir)
			}
			if len(keys[kubelet]) != 1 {
				t.Fatalf("the kubelet wrote mapping keys %q, want one", keys[kubelet])
			}
			if diff := cmp.Diff(keys[kubelet], keys[library]); diff != "" {
				t.Errorf("mapping key for %q (-kubelet +library):\n%s", image, diff)
			}
		})
	}
}

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/imagecache"
)

// forkCacheNodeName is the node of the in-process image cache test.
const forkCacheNodeName = "forkcache-1"

// configuredKubelet writes, in dir, a kubelet program that installs config
// as <its --root-dir>/pullrecords/config.yaml and then execs bin: the node
// configuration is in place before the kubelet first starts, although
// nodetest makes the root directory.
func configuredKubelet(t *testing.T, dir, bin, config string) string {
	t.Helper()
	configFile := filepath.Join(dir, "node-config.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "kubelet")
	script := `#!/bin/sh
root=
for a in "$@"; do
	case "$a" in --root-dir=*) root=${a#--root-dir=} ;; esac
done
[ -n "$root" ] || { echo "no --root-dir" >&2; exit 2; }
mkdir -p "$root/pullrecords" && cp '` + configFile + `' "$root/pullrecords/config.yaml" || exit 2
exec '` + bin + `' "$@"
`
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog
}

// TestForkInProcessImageCache runs the fork with a node configuration
// naming a cache file (imageCacheFile) that declares tenant A's private
// image with an inline pull secret (the namespace, name and UID of the real
// Secret in the API server, and its credential) and a public image without
// one. The kubelet process pulls both at start-up, before any pod asks.
// Then, on that node: a pod of tenant A holding the secret runs the private
// image without the registry being asked again; a pod of tenant B without
// it gets ErrImageNeverPull (Never) and ErrImagePull (IfNotPresent: the
// registry refuses it); the public image runs for tenant B with Never.
func TestForkInProcessImageCache(t *testing.T) {
	shared := sharedScene(t)
	ctx, cancel := context.WithTimeout(context.Background(), forkTestTimeout)
	defer cancel()
	fork := forkKubelet(t, ctx)

	srv, err := apiservertest.Start(ctx, apiservertest.Options{NodeNames: []string{forkCacheNodeName}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	s := *shared
	s.srv = srv
	if s.cs, err = kubernetes.NewForConfig(srv.Admin); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		if _, err := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustSecret(t, ctx, s.cs, "tenant-a", "regcred", s.origin.Host, s.auth.Username, s.auth.Password)
	secret, err := s.cs.CoreV1().Secrets("tenant-a").Get(ctx, "regcred", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cacheFile := filepath.Join(dir, "caches.yaml")
	caches := fmt.Sprintf(`- namespace: tenant-a
  name: warm
  images: [%s]
  pullSecret:
    namespace: tenant-a
    name: regcred
    uid: %s
    username: %s
    password: %s
- namespace: shared
  name: public
  images: [%s]
`, s.private, secret.UID, s.auth.Username, s.auth.Password, s.publicImage)
	if err := os.WriteFile(cacheFile, []byte(caches), 0o600); err != nil {
		t.Fatal(err)
	}
	prog := configuredKubelet(t, dir, fork,
		"apiVersion: pullrecords.io/v1alpha1\nkind: NodeConfiguration\nimageCacheFile: "+cacheFile+"\n")

	n, err := nodetest.StartNode(ctx, nodetest.NodeOptions{
		Name:               forkCacheNodeName,
		Server:             s.srv,
		Kubelet:            prog,
		SandboxImage:       s.sandbox,
		InsecureRegistries: []string{s.public.Host, s.origin.Host},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)

	// The images arrive through the kubelet process alone: no pod asked.
	svc, err := cri.Dial(ctx, n.CRIEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	t0 := time.Now()
	waitFor(t, ctx, "the cached images on the node", func() bool {
		for _, img := range []string{s.private, s.publicImage} {
			if st, err := svc.ImageStatus(ctx, img); err != nil || st == nil {
				return false
			}
		}
		return true
	})
	t.Logf("both cached images on the node %v after it was Ready", time.Since(t0).Round(time.Millisecond))
	// The status lines are written after the pulls are recorded; wait for
	// both caches' so that no pod below races the recording.
	waitFor(t, ctx, "both caches' status lines", func() bool {
		log, _ := os.ReadFile(n.KubeletLog())
		return bytes.Contains(log, []byte(`cache="tenant-a/warm" workType="create"`)) &&
			bytes.Contains(log, []byte(`cache="shared/public" workType="create"`))
	})
	log, err := os.ReadFile(n.KubeletLog())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{forkStartLine, "imageCacheFile=" + cacheFile, "Image cache: in process"} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("the kubelet log lacks %q", want)
		}
	}
	if bytes.Contains(log, []byte(s.auth.Password)) {
		t.Errorf("the kubelet log holds the registry password")
	}

	before := countRequests(t, s.origin)
	for i, p := range []forkPod{
		{ns: "tenant-a", image: s.private, secret: "regcred", want: outcomeSucceeded},
		{ns: "tenant-b", image: s.private, policy: corev1.PullNever, want: outcomeErrImageNeverPull},
		{ns: "tenant-b", image: s.publicImage, policy: corev1.PullNever, want: outcomeSucceeded},
		{ns: "tenant-b", image: s.private, want: outcomeErrImagePull},
	} {
		name := fmt.Sprintf("cache-%d", i)
		s.createPod(t, ctx, podSpec{ns: p.ns, name: name, node: n.Name, image: p.image, secret: p.secret, policy: p.policy})
		got := waitOutcome(ctx, &s, p.ns, name)
		if got != p.want {
			t.Errorf("pod in %s, image %s, secret %q, policy %q: outcome %s, want %s\n%s",
				p.ns, p.image, p.secret, p.policy, got, p.want, lastLines(n.KubeletLog(), 20))
		}
		s.deletePodAndWait(t, ctx, p.ns, name)
		if i == 0 {
			// The holder's pod used the cached pull: the kubelet asked the
			// registry nothing.
			if after := countRequests(t, s.origin); after != before {
				t.Errorf("tenant A's pod made %d requests to the private registry; want none (the cache's record serves it)", after-before)
			}
		}
	}
	applied, err := imagecache.LoadState(filepath.Join(n.RootDir, "pullrecords", "imagecache"))
	if err != nil || len(applied) != 2 {
		t.Errorf("the cache's state under the kubelet's root: %d caches (%v), want 2", len(applied), err)
	}
}

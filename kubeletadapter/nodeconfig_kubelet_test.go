package kubeletadapter_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	upstream "k8s.io/kubernetes/pkg/kubelet/images/pullmanager"

	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/kubeletadapter"
	"github.com/pullrecords/pullrecords/recordsdir"
)

// onNodeConfig prefixes steps with the node's owner writing content as the
// node configuration and the kubelet restarting, which is when a fork reads
// it. A stock kubelet (the kubelet wiring) never looks at the file.
func onNodeConfig(content string, steps ...step) []step {
	return append([]step{
		{name: "node owner writes the node configuration", do: func(n *node) { writeNodeConfig(n.t, n.dir, content) }},
		{name: "kubelet restarts", restart: true},
	}, steps...)
}

// Step indices after the two onNodeConfig steps.
const firstPodStep = 2

// The kubernetes#138175 scene: alpine is baked into the node image; team-a
// pulls the same content from its own registry with a secret; team-b's pod
// then asks for the preloaded name with imagePullPolicy: Never under
// NeverVerifyPreloadedImages.
const (
	bakedAlpine  = "docker.io/library/alpine:3.20"
	teamAAlpine  = privateReg + "/team-a/alpine:3.20"
	sceneToolPod = firstPodStep + 3 // team-b's second Never pod
)

func preloadedProtectionScene(config string) scenario {
	return scenario{
		name: "kubernetes#138175", policy: kubeletconfig.NeverVerifyPreloadedImages, private: []string{privateReg},
		steps: onNodeConfig(config,
			step{name: "alpine is baked into the node image; team-a's copy has the same content", do: func(n *node) {
				n.rt.mu.Lock()
				n.rt.alias[teamAAlpine] = bakedAlpine
				n.rt.mu.Unlock()
				n.rt.preload(bakedAlpine)
			}},
			step{name: "team-b uses the preloaded image", pod: never("team-b", "tool", bakedAlpine)},
			step{name: "team-a pulls its copy with its secret", pod: always("team-a", "mirror", teamAAlpine, secretA)},
			step{name: "team-b again, same preloaded name", pod: never("team-b", "tool-2", bakedAlpine)},
			step{name: "team-b asks for team-a's name without credentials", pod: ifNotPresent("team-b", "steal", teamAAlpine)},
			step{name: "team-b asks for team-a's name without credentials, Never", pod: never("team-b", "steal-2", teamAAlpine)},
		),
	}
}

// With preloadedImageProtection off (or no file) the adapter answers as the
// stock kubelet: the preloaded name becomes unusable. With it on, the
// preloaded name stays usable, and nothing else changes: team-a's name still
// needs team-a's secret, and the record files are the kubelet's.
func TestNodeConfigPreloadedImageProtection(t *testing.T) {
	enableGate(t)
	stock := play(t, preloadedProtectionScene(configHeader+"preloadedImageProtection: true\n"), kubelet, kubelet)
	logRun(t, stock)
	if got := stock.Outcomes[sceneToolPod]; !strings.Contains(got.Err, "ErrImageNeverPull") {
		t.Fatalf("the stock kubelet no longer shows kubernetes#138175 (step %q: err %q); the scene needs updating", got.Step, got.Err)
	}
	for name, config := range map[string]string{
		"header alone":        configHeader,
		"switch set to false": configHeader + "preloadedImageProtection: false\n",
	} {
		off := play(t, preloadedProtectionScene(config), library, library)
		if diff := cmp.Diff(stock, off); diff != "" {
			t.Errorf("%s: the adapter differs from the stock kubelet (-kubelet +library):\n%s", name, diff)
		}
	}
	on := play(t, preloadedProtectionScene(configHeader+"preloadedImageProtection: true\n"), library, library)
	fixed := on.Outcomes[sceneToolPod]
	if fixed.Err != "" || fixed.ImageRef == "" || len(fixed.Pulls) != 0 {
		t.Errorf("with preloadedImageProtection on, %q: ref %q, err %q, pulls %q; want the preloaded image used without a pull",
			fixed.Step, fixed.ImageRef, fixed.Err, fixed.Pulls)
	}
	// Everything else, team-b's refused attempts on team-a's name
	// included, and every file byte, is as on the stock kubelet.
	want := stock
	want.Outcomes = append([]outcome(nil), stock.Outcomes...)
	want.Outcomes[sceneToolPod] = fixed
	if diff := cmp.Diff(want, on); diff != "" {
		t.Errorf("with preloadedImageProtection on, more than the kubernetes#138175 step differs from the stock kubelet (-want +got):\n%s", diff)
	}
	for _, i := range []int{sceneToolPod + 1, sceneToolPod + 2} {
		if o := on.Outcomes[i]; o.Err == "" {
			t.Errorf("with preloadedImageProtection on, %q succeeded (ref %q): team-a's image without its secret", o.Step, o.ImageRef)
		}
	}
}

// A secret recorded for "busybox" serves "docker.io/library/busybox" with
// normalizedImageNames on; off, the adapter pulls again as the stock
// kubelet does. A pod without credentials gets nothing either way.
func TestNodeConfigNormalizedImageNames(t *testing.T) {
	enableGate(t)
	hub := dockerSecret("ns1", "hub", "uid-hub", "docker.io", "pw")
	scene := func(config string) scenario {
		return scenario{
			name: "normalised names", private: []string{"docker.io"},
			steps: onNodeConfig(config,
				step{name: "pull busybox with a secret", pod: ifNotPresent("ns1", "a", "busybox", hub)},
				step{name: "same secret, fully qualified name", pod: ifNotPresent("ns1", "b", "docker.io/library/busybox", hub)},
				step{name: "same secret, another spelling, Never", pod: never("ns1", "c", "library/busybox:latest", hub)},
				step{name: "no credentials, fully qualified name", pod: ifNotPresent("ns2", "d", "docker.io/library/busybox")},
				step{name: "no credentials, short name, Never", pod: never("ns2", "e", "busybox")},
			),
		}
	}
	const qualified = firstPodStep + 1
	stock := play(t, scene(configHeader+"normalizedImageNames: true\n"), kubelet, kubelet)
	logRun(t, stock)
	if got := stock.Outcomes[qualified].Pulls; len(got) != 1 {
		t.Fatalf("the stock kubelet pulled %q for the fully qualified name, want one pull; the scene needs updating", got)
	}
	off := play(t, scene(configHeader+"normalizedImageNames: false\n"), library, library)
	if diff := cmp.Diff(stock, off); diff != "" {
		t.Errorf("switch off: the adapter differs from the stock kubelet (-kubelet +library):\n%s", diff)
	}
	on := play(t, scene(configHeader+"normalizedImageNames: true\n"), library, library)
	logRun(t, on)
	for _, i := range []int{qualified, qualified + 1} {
		if o := on.Outcomes[i]; o.Err != "" || o.ImageRef == "" || len(o.Pulls) != 0 {
			t.Errorf("switch on, %q: ref %q, err %q, pulls %q; want the recorded secret to serve it without a pull", o.Step, o.ImageRef, o.Err, o.Pulls)
		}
	}
	for _, i := range []int{qualified + 2, qualified + 3} {
		if o := on.Outcomes[i]; o.Err == "" {
			t.Errorf("switch on, %q succeeded (ref %q): a pod without credentials used the private image", o.Step, o.ImageRef)
		}
		if diff := cmp.Diff(stock.Outcomes[i], on.Outcomes[i]); diff != "" {
			t.Errorf("switch on, a pod without credentials is treated otherwise than on the stock kubelet (-kubelet +library):\n%s", diff)
		}
	}
	for name, content := range on.Files {
		if strings.HasPrefix(name, "pulled/") && (!strings.Contains(content, `"docker.io/library/busybox":`) || strings.Contains(content, `"busybox":`)) {
			t.Errorf("switch on, %s maps other keys than the normalised name: %s", name, content)
		}
	}
}

// newForKubelet calls NewForKubelet over root with the test's defaults and
// logger, and closes what it returns at the end of the test.
func newForKubelet(t *testing.T, logger klog.Logger, root string, opts ...kubeletadapter.Option) (*kubeletadapter.ImagePullManager, error) {
	t.Helper()
	policy, err := upstream.NewImagePullCredentialVerificationPolicy(kubeletconfig.NeverVerifyPreloadedImages, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := klog.NewContext(context.Background(), logger)
	opts = append([]kubeletadapter.Option{kubeletadapter.WithRegisterer(prometheus.NewRegistry()), kubeletadapter.WithStoreOptions(fsstore.WithoutSync())}, opts...)
	m, err := kubeletadapter.NewForKubelet(ctx, root, policy, newFakeRuntime(), 0, intentCacheSize, recordsCacheSize, opts...)
	if m != nil {
		t.Cleanup(func() {
			if err := m.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	return m, err
}

// A malformed node configuration keeps the kubelet from starting, before
// the records are opened, and a fixed one lets it start.
func TestNewForKubeletMalformedNodeConfig(t *testing.T) {
	enableGate(t)
	root := t.TempDir()
	path := writeNodeConfig(t, root, configHeader+"preloadedImageProtection: yes please\n")
	m, err := newForKubelet(t, ktesting.NewLogger(t, ktesting.NewConfig()), root)
	if err == nil || m != nil {
		t.Fatalf("NewForKubelet over a malformed node configuration = %v, %v; want an error", m, err)
	}
	if prefix := "pullrecords node configuration " + path + ": "; !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("error %q does not start with %q", err, prefix)
	}
	if _, statErr := os.Lstat(filepath.Join(root, fsstore.DirName)); !os.IsNotExist(statErr) {
		t.Errorf("the records directory was touched before the configuration was read (%v)", statErr)
	}
	writeNodeConfig(t, root, configHeader+"preloadedImageProtection: true\n")
	if _, err := newForKubelet(t, ktesting.NewLogger(t, ktesting.NewConfig()), root); err != nil {
		t.Fatalf("NewForKubelet after the file was fixed: %v", err)
	}
}

// WithNodeConfigPath reads another file, and "" none at all.
func TestWithNodeConfigPath(t *testing.T) {
	enableGate(t)
	root := t.TempDir()
	writeNodeConfig(t, root, "not: a configuration\n")
	if _, err := newForKubelet(t, ktesting.NewLogger(t, ktesting.NewConfig()), root); err == nil {
		t.Fatal("the malformed default file was not read")
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	m, err := newForKubelet(t, logger, root, kubeletadapter.WithNodeConfigPath(""))
	if err != nil {
		t.Fatalf("WithNodeConfigPath(\"\") read the default file: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); !strings.Contains(logs, `nodeConfig="not read`) || !strings.Contains(logs, `deliberateDifferences="none turned on"`) {
		t.Errorf("the start-up line does not say the file was not read:\n%s", logs)
	}
	elsewhere := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(elsewhere, []byte(configHeader+"preloadedImageProtection: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newForKubelet(t, ktesting.NewLogger(t, ktesting.NewConfig()), root, kubeletadapter.WithNodeConfigPath(elsewhere)); err == nil || !strings.Contains(err.Error(), elsewhere) {
		t.Errorf("WithNodeConfigPath(%q) over a malformed file: %v; want its error", elsewhere, err)
	}
}

// The start-up line names the switches in force and where they came from.
func TestNodeConfigStartupLine(t *testing.T) {
	enableGate(t)
	for _, tc := range []struct {
		name     string
		config   string // "" for no file
		switches string
		source   func(root string) string
	}{
		{"no file", "", `deliberateDifferences="none turned on"`,
			func(root string) string { return `nodeConfig="no file at ` + kubeletadapter.NodeConfigPath(root) + `"` }},
		{"all off", configHeader, `deliberateDifferences="none turned on"`,
			func(root string) string { return `nodeConfig="` + kubeletadapter.NodeConfigPath(root) + `"` }},
		{"one on", configHeader + "normalizedImageNames: true\n", `deliberateDifferences="normalizedImageNames"`,
			func(root string) string { return `nodeConfig="` + kubeletadapter.NodeConfigPath(root) + `"` }},
		{"both on", configHeader + "preloadedImageProtection: true\nnormalizedImageNames: true\n", `deliberateDifferences="preloadedImageProtection, normalizedImageNames"`,
			func(root string) string { return `nodeConfig="` + kubeletadapter.NodeConfigPath(root) + `"` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.config != "" {
				writeNodeConfig(t, root, tc.config)
			}
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			if _, err := newForKubelet(t, logger, root); err != nil {
				t.Fatal(err)
			}
			var line string
			for _, l := range strings.Split(logger.GetSink().(ktesting.Underlier).GetBuffer().String(), "\n") {
				if strings.Contains(l, "Image pull manager: pullrecords library") {
					line = l
				}
			}
			if line == "" {
				t.Fatal("no start-up line")
			}
			for _, want := range []string{tc.switches, tc.source(root)} {
				if !strings.Contains(line, want) {
					t.Errorf("start-up line %q lacks %s", line, want)
				}
			}
		})
	}
}

// An empty root directory is refused by the records directory; no node
// configuration is read relative to the working directory first.
func TestNewForKubeletEmptyRootReadsNoConfig(t *testing.T) {
	enableGate(t)
	cwd := t.TempDir()
	t.Chdir(cwd)
	writeNodeConfig(t, cwd, "malformed\n")
	_, err := newForKubelet(t, ktesting.NewLogger(t, ktesting.NewConfig()), "")
	if !errors.Is(err, recordsdir.ErrNoRootDir) || errors.Is(err, kubeletadapter.ErrInvalidNodeConfig) {
		t.Errorf("NewForKubelet with an empty root directory: %v; want recordsdir.ErrNoRootDir, no configuration read", err)
	}
}

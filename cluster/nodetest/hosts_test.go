package nodetest_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/cri"
)

// TestRegistryHostsMirror configures an open registry holding a copy of an
// htpasswd registry's image as that registry's mirror (RegistryHosts): an
// anonymous CRI pull of the private image succeeds, the mirror served the
// manifest and blobs and the origin saw no request; an image of a registry
// only listed in InsecureRegistries is pulled from it directly (hosts.toml
// too). This is the bypass the shim exists for, on containerd alone.
func TestRegistryHostsMirror(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestRegistryHostsMirror starts containerd and must run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	auth := &nodetest.BasicAuth{Username: "robot", Password: "mirror-pw"}
	origin, err := nodetest.StartRegistry(ctx, t.TempDir(), auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Stop)
	mirror, err := nodetest.StartRegistry(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mirror.Stop)
	other, err := nodetest.StartRegistry(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)

	files := map[string]nodetest.File{"hello.txt": {Data: []byte("mirrored\n")}}
	image := origin.Host + "/tenant-a/app:v1"
	d1, err := nodetest.PushImage(ctx, origin, image, files, []string{"/hello.txt"}, auth)
	if err != nil {
		t.Fatal(err)
	}
	if d2, err := nodetest.PushImage(ctx, mirror, "tenant-a/app:v1", files, []string{"/hello.txt"}, nil); err != nil || d2 != d1 {
		t.Fatalf("copy on the mirror: %s, %v; want %s", d2, err, d1)
	}
	otherImage := other.Host + "/public/app:v1"
	if _, err := nodetest.PushImage(ctx, other, otherImage, files, []string{"/hello.txt"}, nil); err != nil {
		t.Fatal(err)
	}
	originBefore := requests(t, origin)

	cd, err := nodetest.StartContainerd(ctx, nodetest.ContainerdOptions{
		Name:               "mirror",
		InsecureRegistries: []string{other.Host},
		RegistryHosts:      []nodetest.RegistryHost{{Host: origin.Host, Server: origin.URL(), Mirrors: []string{mirror.URL()}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cd.Stop)
	toml, err := os.ReadFile(filepath.Join(cd.Dir, "certs.d", origin.Host, "hosts.toml"))
	if err != nil || !strings.Contains(string(toml), `[host."`+mirror.URL()+`"]`) {
		t.Fatalf("hosts.toml of %s: %v\n%s", origin.Host, err, toml)
	}
	cfg, _ := os.ReadFile(filepath.Join(cd.Dir, "containerd", "config.toml"))
	if strings.Contains(string(cfg), "registry.mirrors") || !strings.Contains(string(cfg), "config_path") {
		t.Fatalf("config.toml: want config_path and no registry.mirrors:\n%s", cfg)
	}
	svc, err := cri.Dial(ctx, cd.CRIEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })

	if _, err := svc.PullImage(ctx, image, nil); err != nil {
		t.Fatalf("anonymous pull of %s through the mirror: %v\n%s", image, err, tail(cd.Log(), 30))
	}
	if _, err := svc.PullImage(ctx, otherImage, nil); err != nil {
		t.Fatalf("pull of %s (InsecureRegistries as hosts.toml): %v\n%s", otherImage, err, tail(cd.Log(), 30))
	}
	if got := requests(t, origin); len(got) != len(originBefore) {
		t.Errorf("origin saw requests during the pull: %+v", got[len(originBefore):])
	}
	var blobs, manifests int
	eventually(t, ctx, "mirror logged the pull", func() bool {
		blobs, manifests = 0, 0
		for _, r := range requests(t, mirror) {
			if r.Method == http.MethodGet && r.IsBlob() && r.Status == http.StatusOK && strings.HasPrefix(r.UserAgent, "containerd/") {
				blobs++
			}
			if r.IsManifest() && r.Status == http.StatusOK && strings.HasPrefix(r.UserAgent, "containerd/") {
				manifests++
			}
		}
		return blobs >= 2 && manifests >= 1
	})
	t.Logf("mirror served %d manifest and %d blob requests to containerd", manifests, blobs)
	if n := countContainerd(requests(t, other)); n == 0 {
		t.Errorf("the insecure registry %s served containerd nothing", other.Host)
	}
}

func requests(t *testing.T, r *nodetest.Registry) []nodetest.RegistryRequest {
	t.Helper()
	got, err := r.Requests()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func countContainerd(rs []nodetest.RegistryRequest) int {
	n := 0
	for _, r := range rs {
		if strings.HasPrefix(r.UserAgent, "containerd/") {
			n++
		}
	}
	return n
}

// eventually polls cond every 20 ms until it holds, failing the test when
// ctx ends first (a log line is written after the answer it logs).
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

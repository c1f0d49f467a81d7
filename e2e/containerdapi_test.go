//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/cri/containerdapi"
)

// TestContainerdAPI runs containerdapi against a real containerd (Debian's
// 1.6) and real registries: an image pulled through the CRI is readable
// from the content store at several offsets, byte for byte as the registry
// holds its layer; the same image pulled under a second name (another
// registry) loses that name, and only that name, to RemoveName: the CRI
// stops resolving it once the CRI plugin has handled containerd's image
// event, while the first name, the image ID and the content stay. A wrong
// target leaves the name.
func TestContainerdAPI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestContainerdAPI starts containerd and must run as root")
	}
	ctx := testContext(t)
	regA, err := nodetest.StartRegistry(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("registry A: %v", err)
	}
	t.Cleanup(regA.Stop)
	regB, err := nodetest.StartRegistry(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("registry B: %v", err)
	}
	t.Cleanup(regB.Stop)

	// Seeded random bytes do not compress: the layer is over 3 MiB, so
	// containerd answers a whole read in several 1 MiB chunks.
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 32))
	payload := make([]byte, 3<<20+12345)
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	files := map[string]nodetest.File{"payload.bin": {Data: payload}}
	nameA := regA.Host + "/tenant-a/app:v1"
	nameB := regB.Host + "/tenant-b/copy:v2"
	digest, err := nodetest.PushImage(ctx, regA, nameA, files, nil, nil)
	if err != nil {
		t.Fatalf("push %s: %v", nameA, err)
	}
	if d, err := nodetest.PushImage(ctx, regB, nameB, files, nil, nil); err != nil || d != digest {
		t.Fatalf("push %s: %s, %v; want the same digest %s", nameB, d, err, digest)
	}
	layerDigest, layer := fetchLayer(t, ctx, regA, "tenant-a/app", digest)

	cd, err := nodetest.StartContainerd(ctx, nodetest.ContainerdOptions{Name: "cdapi", InsecureRegistries: []string{regA.Host, regB.Host}})
	if err != nil {
		t.Fatalf("containerd: %v", err)
	}
	t.Cleanup(cd.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", cd.Log(), lastLines(cd.Log(), 30))
		}
	})
	images, err := cri.Dial(ctx, cd.CRIEndpoint)
	if err != nil {
		t.Fatalf("CRI: %v", err)
	}
	t.Cleanup(func() { _ = images.Close() })
	conn, err := cri.NewConn(cd.CRIEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	content := containerdapi.NewContent(conn, containerdapi.DefaultNamespace)
	names := containerdapi.NewImages(conn, containerdapi.DefaultNamespace)

	// Nothing pulled yet: the layer is not held.
	if _, ok, err := content.Size(ctx, layerDigest); ok || err != nil {
		t.Fatalf("Size of the layer before any pull = %v, %v; want not held", ok, err)
	}
	imageID, err := images.PullImage(ctx, nameA, nil)
	if err != nil {
		t.Fatalf("pull %s: %v", nameA, err)
	}

	size, ok, err := content.Size(ctx, layerDigest)
	if err != nil || !ok || size != int64(len(layer)) {
		t.Fatalf("Size of the layer = %d, %v, %v; want %d, true", size, ok, err, len(layer))
	}
	if size <= 3<<20 {
		t.Fatalf("layer is %d bytes; the test needs more than 3 MiB", size)
	}
	checkReads(t, ctx, content, layerDigest, layer)
	if _, ok, err := content.Size(ctx, "sha256:"+fmt.Sprintf("%064x", 7)); ok || err != nil {
		t.Errorf("Size of an absent digest = %v, %v; want 0, false, nil", ok, err)
	}
	if n, err := content.ReadAt(ctx, layerDigest, make([]byte, 10), size-4); n != 4 || !errors.Is(err, containerdapi.ErrShortRead) {
		t.Errorf("ReadAt past the end = %d, %v; want 4, ErrShortRead", n, err)
	}
	if n, err := content.ReadAt(ctx, layerDigest, make([]byte, 1), size+1); n != 0 || !errors.Is(err, containerdapi.ErrShortRead) {
		t.Errorf("ReadAt beyond the end = %d, %v; want 0, ErrShortRead", n, err)
	}
	if _, err := containerdapi.NewContent(conn, "no-such-namespace").ReadAt(ctx, layerDigest, make([]byte, 1), 0); !errors.Is(err, containerdapi.ErrNotHeld) {
		t.Errorf("ReadAt in another namespace = %v; want ErrNotHeld", err)
	}

	// The same image under a second name.
	if id, err := images.PullImage(ctx, nameB, nil); err != nil || id != imageID {
		t.Fatalf("pull %s = %s, %v; want the image %s", nameB, id, err, imageID)
	}
	for _, name := range []string{nameA, nameB} {
		if got, ok, err := names.Target(ctx, name); err != nil || !ok || got != digest {
			t.Fatalf("Target(%s) = %s, %v, %v; want %s", name, got, ok, err, digest)
		}
	}
	if _, ok, err := names.Target(ctx, regB.Host+"/tenant-b/copy:v3"); ok || err != nil {
		t.Errorf("Target of an absent name = %v, %v; want false, nil", ok, err)
	}

	wrong := "sha256:" + fmt.Sprintf("%064x", 9)
	if err := names.RemoveName(ctx, nameB, wrong); !errors.Is(err, containerdapi.ErrNameMoved) {
		t.Errorf("RemoveName(%s, a wrong target) = %v; want ErrNameMoved", nameB, err)
	}
	if got, ok, err := names.Target(ctx, nameB); !ok || err != nil || got != digest {
		t.Fatalf("after a refused RemoveName, Target(%s) = %s, %v, %v; want it untouched", nameB, got, ok, err)
	}

	if err := names.RemoveName(ctx, nameB, digest); err != nil {
		t.Fatalf("RemoveName(%s): %v", nameB, err)
	}
	removedAt := time.Now()
	if _, ok, err := names.Target(ctx, nameB); ok || err != nil {
		t.Errorf("Target(%s) after RemoveName = %v, %v; want gone", nameB, ok, err)
	}
	// The CRI plugin learns of the deletion from containerd's image event.
	awaitCRIForgets(t, ctx, images, nameB, removedAt)

	// The CRI plugin's pull also created the repository-digest name (and
	// the image ID name): RemoveName of the tag left it, and the CRI still
	// resolves it until it is removed too.
	digestNameB := regB.Host + "/tenant-b/copy@" + digest
	if got, ok, err := names.Target(ctx, digestNameB); !ok || err != nil || got != digest {
		t.Fatalf("Target(%s), the pull's digest name = %s, %v, %v; want %s", digestNameB, got, ok, err, digest)
	}
	if got, ok, err := names.Target(ctx, imageID); !ok || err != nil || got != digest {
		t.Errorf("Target(%s), the image ID name = %s, %v, %v; want %s", imageID, got, ok, err, digest)
	}
	if img, err := images.ImageStatus(ctx, digestNameB); err != nil || img == nil || img.ID != imageID {
		t.Fatalf("CRI ImageStatus(%s) after removing only the tag = %+v, %v; want the image", digestNameB, img, err)
	}
	if err := names.RemoveName(ctx, digestNameB, digest); err != nil {
		t.Fatalf("RemoveName(%s): %v", digestNameB, err)
	}
	awaitCRIForgets(t, ctx, images, digestNameB, time.Now())

	for _, ref := range []string{nameA, imageID} {
		img, err := images.ImageStatus(ctx, ref)
		if err != nil || img == nil || img.ID != imageID {
			t.Errorf("CRI ImageStatus(%s) after RemoveName = %+v, %v; want the image %s", ref, img, err, imageID)
			continue
		}
		for _, name := range append(img.RepoTags, img.RepoDigests...) {
			if name == nameB || name == digestNameB {
				t.Errorf("CRI ImageStatus(%s) still lists a removed name: tags %v, digests %v", ref, img.RepoTags, img.RepoDigests)
			}
		}
		if len(img.RepoTags) != 1 || img.RepoTags[0] != nameA || len(img.RepoDigests) != 1 || img.RepoDigests[0] != regA.Host+"/tenant-a/app@"+digest {
			t.Errorf("CRI ImageStatus(%s): tags %v, digests %v; want only %s's", ref, img.RepoTags, img.RepoDigests, nameA)
		}
		t.Logf("CRI ImageStatus(%s) after RemoveName: tags %v, digests %v", ref, img.RepoTags, img.RepoDigests)
	}
	if got, ok, err := names.Target(ctx, nameA); !ok || err != nil || got != digest {
		t.Errorf("Target(%s) after removing %s = %s, %v, %v; want %s", nameA, nameB, got, ok, err, digest)
	}
	if size2, ok, err := content.Size(ctx, layerDigest); !ok || err != nil || size2 != size {
		t.Errorf("Size of the layer after RemoveName = %d, %v, %v; want %d, true", size2, ok, err, size)
	}
	checkReads(t, ctx, content, layerDigest, layer)
	if err := names.RemoveName(ctx, nameB, digest); err != nil {
		t.Errorf("RemoveName of the gone name %s = %v; want nil", nameB, err)
	}
}

// awaitCRIForgets polls the CRI's ImageStatus of name until it finds no
// image (the CRI plugin handled the deletion's event), for at most 10 s,
// and logs how long that took since removedAt.
func awaitCRIForgets(t *testing.T, ctx context.Context, images *cri.ImageService, name string, removedAt time.Time) {
	t.Helper()
	for polls := 1; ; polls++ {
		img, err := images.ImageStatus(ctx, name)
		if err != nil {
			t.Fatalf("CRI ImageStatus(%s): %v", name, err)
		}
		if img == nil {
			t.Logf("CRI ImageStatus(%s) found no image %v after RemoveName (poll %d)", name, time.Since(removedAt), polls)
			return
		}
		if time.Since(removedAt) > 10*time.Second {
			t.Fatalf("CRI ImageStatus(%s) still finds %+v 10 s after RemoveName", name, *img)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkReads reads blob dgst at offsets across containerd's 1 MiB chunks
// and compares with want, the registry's bytes.
func checkReads(t *testing.T, ctx context.Context, c *containerdapi.Content, dgst string, want []byte) {
	t.Helper()
	end := int64(len(want))
	for _, rd := range []struct {
		off int64
		n   int
	}{
		{0, 1}, {0, 512}, {1, 64}, {1<<20 - 3, 7}, {2<<20 + 1, 4096},
		{end / 2, 1}, {end - 32, 32}, {5, 3 << 20}, {end - 1, 1},
	} {
		p := make([]byte, rd.n)
		n, err := c.ReadAt(ctx, dgst, p, rd.off)
		if err != nil || n != rd.n {
			t.Errorf("ReadAt(%d, +%d) = %d, %v; want %d, nil", rd.off, rd.n, n, err, rd.n)
			continue
		}
		if !bytes.Equal(p, want[rd.off:rd.off+int64(rd.n)]) {
			t.Errorf("ReadAt(%d, +%d): bytes differ from the registry's blob", rd.off, rd.n)
		}
	}
}

// fetchLayer GETs the manifest digest of repo from reg and its one layer,
// returning the layer's digest and bytes.
func fetchLayer(t *testing.T, ctx context.Context, reg *nodetest.Registry, repo, digest string) (string, []byte) {
	t.Helper()
	get := func(path, accept string) []byte {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, reg.URL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s, %v", path, resp.Status, err)
		}
		return body
	}
	var m struct {
		Layers []struct {
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"layers"`
	}
	raw := get(filepath.Join("/v2", repo, "manifests", digest), "application/vnd.oci.image.manifest.v1+json")
	if err := json.Unmarshal(raw, &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest %s: %d layers, %v; want one", digest, len(m.Layers), err)
	}
	layer := get(filepath.Join("/v2", repo, "blobs", m.Layers[0].Digest), "")
	if int64(len(layer)) != m.Layers[0].Size {
		t.Fatalf("layer %s: %d bytes, the manifest says %d", m.Layers[0].Digest, len(layer), m.Layers[0].Size)
	}
	return m.Layers[0].Digest, layer
}

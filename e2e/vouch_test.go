//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/cri"
)

// The registry-vouching scene (issue 32, item 4): tenant A's private image
// (digest D) is on a node; tenant B, with no credential, names it at a
// registry B controls that answers the manifest HEAD with D and holds none
// of A's bytes. vouch-1 runs without the shim, vouch-2 with it.
func init() { shimNodeNames = append(shimNodeNames, "vouch-1", "vouch-2") }

// vouchingRegistry is registry E, the one tenant B controls: every manifest
// HEAD answers 200 with A's digest, media type and size; a manifest GET
// answers 404, or A's exact manifest bytes when leaked is set (as if they
// had leaked); every blob request answers 404. It logs every request.
type vouchingRegistry struct {
	srv      *httptest.Server
	host     string
	manifest originManifest
	leaked   bool

	mu  sync.Mutex
	log []nodetest.RegistryRequest
}

func startVouchingRegistry(t *testing.T, m originManifest, leaked bool) *vouchingRegistry {
	t.Helper()
	v := &vouchingRegistry{manifest: m, leaked: leaked}
	v.srv = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.srv.Close)
	v.host = strings.TrimPrefix(v.srv.URL, "http://")
	return v
}

func (v *vouchingRegistry) serve(w http.ResponseWriter, r *http.Request) {
	status := v.answer(w, r)
	v.mu.Lock()
	v.log = append(v.log, nodetest.RegistryRequest{Method: r.Method, Path: r.URL.Path, Status: status, UserAgent: r.UserAgent()})
	v.mu.Unlock()
}

func (v *vouchingRegistry) answer(w http.ResponseWriter, r *http.Request) int {
	path := r.URL.Path
	switch {
	case path == "/v2/" || path == "/v2":
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	case strings.HasPrefix(path, "/v2/") && strings.Contains(path, "/manifests/"):
		if r.Method == http.MethodHead || (r.Method == http.MethodGet && v.leaked) {
			h := w.Header()
			h.Set("Content-Type", v.manifest.mediaType)
			h.Set("Docker-Content-Digest", v.manifest.digest)
			h.Set("Content-Length", fmt.Sprint(len(v.manifest.body)))
			w.WriteHeader(http.StatusOK)
			if r.Method == http.MethodGet {
				_, _ = w.Write(v.manifest.body)
			}
			return http.StatusOK
		}
		return registryError(w, "MANIFEST_UNKNOWN", "manifest unknown")
	case strings.Contains(path, "/blobs/"):
		return registryError(w, "BLOB_UNKNOWN", "blob unknown to registry")
	}
	return registryError(w, "NAME_UNKNOWN", "repository name not known to registry")
}

func registryError(w http.ResponseWriter, code, msg string) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`+"\n", code, msg)
	return http.StatusNotFound
}

// requests returns E's requests after the first skip ones.
func (v *vouchingRegistry) requests(skip int) []nodetest.RegistryRequest {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]nodetest.RegistryRequest(nil), v.log[skip:]...)
}

func (v *vouchingRegistry) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.log)
}

// logRequests writes E's log into the test's output.
func (v *vouchingRegistry) logRequests(t *testing.T, name string) {
	t.Helper()
	var b strings.Builder
	for _, r := range v.requests(0) {
		fmt.Fprintf(&b, "\n  %s %s -> %d (%s)", r.Method, r.Path, r.Status, r.UserAgent)
	}
	t.Logf("registry E %s (%s, leaked manifest %v): %d requests%s", name, v.host, v.leaked, v.count(), b.String())
}

// originManifest is tenant A's manifest as the origin serves it.
type originManifest struct {
	digest    string
	mediaType string
	body      []byte
	config    string
	layers    []string
}

// fetchManifest GETs repo:ref's manifest from reg with auth and checks that
// its bytes hash to the digest the registry names.
func fetchManifest(t *testing.T, ctx context.Context, reg *nodetest.Registry, repo, ref string, auth *nodetest.BasicAuth) originManifest {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, reg.URL()+"/v2/"+repo+"/manifests/"+ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	if auth != nil {
		req.SetBasicAuth(auth.Username, auth.Password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET manifest %s/%s:%s: %s, %v", reg.Host, repo, ref, resp.Status, err)
	}
	sum := sha256.Sum256(body)
	m := originManifest{digest: "sha256:" + hex.EncodeToString(sum[:]), mediaType: resp.Header.Get("Content-Type"), body: body}
	if got := resp.Header.Get("Docker-Content-Digest"); got != m.digest {
		t.Fatalf("manifest %s/%s:%s: Docker-Content-Digest %s, bytes hash to %s", reg.Host, repo, ref, got, m.digest)
	}
	var parsed struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(body, &parsed); err != nil {
		t.Fatalf("manifest %s/%s:%s: %v", reg.Host, repo, ref, err)
	}
	m.config = parsed.Config.Digest
	for _, l := range parsed.Layers {
		m.layers = append(m.layers, l.Digest)
	}
	return m
}

// startVouchNode starts one node whose containerd reaches the insecure
// registries over plain HTTP, with no mirror, and with "pullrecords shim"
// (given the same insecure registries) in front of containerd when withShim
// is set. Both stop in t.Cleanup.
func (s *shimScene) startVouchNode(t *testing.T, ctx context.Context, name string, insecure []string, withShim bool) (*nodetest.Node, *shimProc) {
	t.Helper()
	opts := nodetest.NodeOptions{
		Name:               name,
		Server:             s.srv,
		Kubelet:            filepath.Join(mustBinDir(t), "kubelet"),
		SandboxImage:       s.sandbox,
		InsecureRegistries: insecure,
	}
	var shim *shimProc
	if withShim {
		opts.RuntimeEndpoint = func(ctx context.Context, containerd string) (string, error) {
			p, err := startShim(t, ctx, name, containerd, insecure)
			if err != nil {
				return "", err
			}
			shim = p
			return p.endpoint, nil
		}
	}
	n, err := nodetest.StartNode(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s's containerd log:\n%s", name, lastLines(n.ContainerdLog(), 30))
		}
	})
	return n, shim
}

// runtimeImages dials the node's containerd (not the shim) for image
// status queries.
func runtimeImages(t *testing.T, ctx context.Context, n *nodetest.Node) *cri.ImageService {
	t.Helper()
	svc, err := cri.Dial(ctx, n.CRIEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// runtimeImageID returns the ID of the image the runtime resolves ref to, "" when
// it has none.
func runtimeImageID(t *testing.T, ctx context.Context, svc *cri.ImageService, ref string) string {
	t.Helper()
	img, err := svc.ImageStatus(ctx, ref)
	if err != nil {
		t.Fatalf("ImageStatus %s: %v", ref, err)
	}
	if img == nil {
		return ""
	}
	return img.ID
}

// containerImageID returns the imageID of the pod's one container.
func (s *shimScene) containerImageID(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	pod, err := s.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s/%s: %d container statuses", ns, name, len(pod.Status.ContainerStatuses))
	}
	return pod.Status.ContainerStatuses[0].ImageID
}

// TestRegistryVouchingWithoutShim keeps the bypass as a test, on a stock
// kubelet v1.37.2 and containerd 1.6 with no mirror: once tenant A's pod
// pulled its private image (digest D), tenant B's pod, with no secret,
// names D at registry E (which answers the manifest HEAD with D and holds
// nothing) and runs A's image, by digest and by a tag E resolves to D. E
// sees only HEADs: containerd takes every byte from its content store. If
// this test fails, the bypass changed: re-read originverify's threat model.
func TestRegistryVouchingWithoutShim(t *testing.T) {
	s := sharedScene(t)
	ctx := shimContext(t)
	a := fetchManifest(t, ctx, s.origin, s.privateRepo, "v1", s.auth)
	e := startVouchingRegistry(t, a, false)
	t.Cleanup(func() { e.logRequests(t, "(i)") })
	n, _ := s.startVouchNode(t, ctx, "vouch-1", []string{s.public.Host, s.origin.Host, e.host}, false)
	svc := runtimeImages(t, ctx, n)

	s.createPod(t, ctx, podSpec{ns: "tenant-a", name: "vouch-a1", node: n.Name, image: s.private, secret: "regcred"})
	s.waitPod(t, ctx, n, "tenant-a", "vouch-a1", "Succeeded", succeeded(t))
	aID := runtimeImageID(t, ctx, svc, s.private)
	if aID == "" {
		t.Fatalf("the runtime has no image %s after tenant A's pod ran", s.private)
	}

	for _, p := range []struct{ name, image string }{
		{"vouch-b-digest", e.host + "/bob/x@" + a.digest},
		{"vouch-b-tag", e.host + "/bob/x:v1"},
	} {
		before := e.count()
		s.createPod(t, ctx, podSpec{ns: "tenant-b", name: p.name, node: n.Name, image: p.image})
		s.waitPod(t, ctx, n, "tenant-b", p.name, "Succeeded (the bypass: no secret, E vouched for D)", succeeded(t))
		if msgs := s.podEvents(t, ctx, "tenant-b", p.name, "Pulling"); len(msgs) == 0 {
			t.Errorf("%s: no Pulling event: the kubelet did not ask the runtime to pull %s", p.name, p.image)
		}
		// A's content: the runtime resolves B's name to A's image, and the
		// container ran the image of manifest D.
		if got := runtimeImageID(t, ctx, svc, p.image); got != aID {
			t.Errorf("%s: the runtime resolves %s to image %q, want tenant A's %s", p.name, p.image, got, aID)
		}
		if got := s.containerImageID(t, ctx, "tenant-b", p.name); !strings.HasSuffix(got, "@"+a.digest) {
			t.Errorf("%s: container imageID %q, want one of manifest %s", p.name, got, a.digest)
		}
		reqs := e.requests(before)
		heads := 0
		for _, r := range reqs {
			if r.Method == http.MethodHead && r.IsManifest() {
				heads++
				continue
			}
			t.Errorf("%s: E served more than manifest HEADs: %+v", p.name, r)
		}
		if heads == 0 {
			t.Errorf("%s: E saw no manifest HEAD: containerd did not resolve at E (requests %+v)", p.name, reqs)
		}
		t.Logf("%s ran tenant A's image %s from %s; E saw %d manifest HEADs and nothing else", p.name, aID, p.image, heads)
	}
}

// TestShimRefusesRegistryVouching is the same scene with "pullrecords shim"
// in front of containerd: tenant B's pods, by digest at an E that answers
// no GET, at an E that serves A's leaked manifest, and by a tag E resolves
// to D, wait in ErrImagePull/ImagePullBackOff with a refusal that names
// E's host and the failed proof, and never run. On the same node tenant A
// runs, tenant C runs the same content (digest D) from a registry of C's
// own that really holds the bytes (the proof's blob reads there are ranged
// or whole blob GETs by the shim, containerd downloads no blob), and a
// public image runs.
func TestShimRefusesRegistryVouching(t *testing.T) {
	s := sharedScene(t)
	ctx := shimContext(t)
	a := fetchManifest(t, ctx, s.origin, s.privateRepo, "v1", s.auth)
	e1 := startVouchingRegistry(t, a, false)
	e2 := startVouchingRegistry(t, a, true)
	t.Cleanup(func() { e1.logRequests(t, "(i)"); e2.logRequests(t, "(ii)") })

	cAuth := &nodetest.BasicAuth{Username: "tenant-c-robot", Password: "pw-" + randomHex(8)}
	cReg, err := nodetest.StartRegistry(ctx, t.TempDir(), cAuth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cReg.Stop)
	cImage := cReg.Host + "/tenant-c/app:v1"
	cDigest, err := nodetest.PushImage(ctx, cReg, cImage, s.privateFiles, []string{"/pause"}, cAuth)
	if err != nil {
		t.Fatal(err)
	}
	if cDigest != a.digest {
		t.Fatalf("tenant C's copy has digest %s, tenant A's %s: not the same content", cDigest, a.digest)
	}
	if err := s.createSecretFor(ctx, "tenant-c", "regcred-c", cAuth, cReg.Host); err != nil {
		t.Fatal(err)
	}

	insecure := []string{s.public.Host, s.origin.Host, cReg.Host, e1.host, e2.host}
	n, shim := s.startVouchNode(t, ctx, "vouch-2", insecure, true)
	svc := runtimeImages(t, ctx, n)

	s.createPod(t, ctx, podSpec{ns: "tenant-a", name: "vouch-a2", node: n.Name, image: s.private, secret: "regcred"})
	s.waitPod(t, ctx, n, "tenant-a", "vouch-a2", "Succeeded (tenant A, with its secret)", succeeded(t))
	aID := runtimeImageID(t, ctx, svc, s.private)
	if aID == "" {
		t.Fatalf("the runtime has no image %s after tenant A's pod ran", s.private)
	}

	bPods := []struct {
		name, image string
		e           *vouchingRegistry
		reasons     []string
	}{
		// E (i) vouches with HEAD but will not serve the manifest it
		// vouched for: the proof's GET finds nothing, a refusal as
		// "not found"; E (ii) serves the leaked manifest and fails the
		// blob challenge: "did not prove".
		{"vouch-b-404", e1.host + "/bob/x@" + a.digest, e1, []string{"prove", "not found at the origin registry"}},
		{"vouch-b-leak", e2.host + "/bob/x@" + a.digest, e2, []string{"prove"}},
		{"vouch-b-tag", e1.host + "/bob/x:v1", e1, []string{"prove", "not found at the origin registry"}},
	}
	for _, p := range bPods {
		s.createPod(t, ctx, podSpec{ns: "tenant-b", name: p.name, node: n.Name, image: p.image})
	}
	for _, p := range bPods {
		s.waitPod(t, ctx, n, "tenant-b", p.name, "refused (ErrImagePull/ImagePullBackOff)", pullRefused(t))
		msg := s.refusalNaming(t, ctx, "tenant-b", p.name, p.image, p.e.host, p.reasons...)
		t.Logf("%s: %s", p.name, msg)
	}
	// Once more after every refusal: still waiting, never run.
	for _, p := range bPods {
		s.waitPod(t, ctx, n, "tenant-b", p.name, "still refused", pullRefused(t))
	}
	// The refused pods retry in back-off: remove them before the controls.
	for _, p := range bPods {
		s.deletePodAndWait(t, ctx, "tenant-b", p.name)
	}
	for _, p := range bPods {
		if id := runtimeImageID(t, ctx, svc, p.image); id != "" {
			t.Errorf("%s: the runtime holds %s (image %s) after the refusal", p.name, p.image, id)
		}
	}
	// The proof asked E for the manifest's bytes; with the leaked manifest
	// it got them and then asked for a blob, which E does not have.
	for _, v := range []*vouchingRegistry{e1, e2} {
		manifestGets, blobGets := 0, 0
		for _, r := range v.requests(0) {
			switch {
			case r.Method == http.MethodGet && r.IsManifest():
				manifestGets++
			case r.Method == http.MethodGet && r.IsBlob():
				blobGets++
			}
		}
		if manifestGets == 0 {
			t.Errorf("E %s: no manifest GET: the shim admitted or refused without fetching the manifest", v.host)
		}
		if v.leaked && blobGets == 0 {
			t.Errorf("E %s (leaked manifest): no blob GET: the shim refused without challenging a blob the node holds", v.host)
		}
	}

	// Tenant C: same digest, real bytes at C's own registry.
	cBefore := countRequests(t, cReg)
	s.createPod(t, ctx, podSpec{ns: "tenant-c", name: "vouch-c", node: n.Name, image: cImage, secret: "regcred-c"})
	s.waitPod(t, ctx, n, "tenant-c", "vouch-c", "Succeeded (tenant C, its own registry holds the bytes)", succeeded(t))
	if got := runtimeImageID(t, ctx, svc, cImage); got != aID {
		t.Errorf("vouch-c: the runtime resolves %s to image %q, want the shared content's %s", cImage, got, aID)
	}
	cReqs := since(t, cReg, cBefore)
	proofReads, layerRanged := 0, 0
	var cLog strings.Builder
	for _, r := range cReqs {
		fmt.Fprintf(&cLog, "\n  %s %s -> %d (%s)", r.Method, r.Path, r.Status, r.UserAgent)
		if r.Method != http.MethodGet || !r.IsBlob() {
			continue
		}
		if strings.HasPrefix(r.UserAgent, "containerd/") {
			t.Errorf("vouch-c: containerd downloaded a blob it holds: %+v", r)
			continue
		}
		switch r.Status {
		case http.StatusPartialContent, http.StatusOK:
			proofReads++
		default:
			t.Errorf("vouch-c: a proof's blob GET at C's registry answered %d: %+v", r.Status, r)
		}
		for _, l := range a.layers {
			if strings.HasSuffix(r.Path, "/blobs/"+l) {
				if r.Status == http.StatusPartialContent {
					layerRanged++
				} else {
					t.Errorf("vouch-c: the proof downloaded the whole layer %s from a registry that serves ranges: %+v", l, r)
				}
			}
		}
	}
	if proofReads == 0 || layerRanged == 0 {
		t.Errorf("vouch-c: C's registry saw %d blob reads by the proof, %d ranged layer reads; want both > 0", proofReads, layerRanged)
	}
	t.Logf("C's registry during tenant C's pull:%s", cLog.String())

	s.createPod(t, ctx, podSpec{ns: "tenant-b", name: "vouch-public", node: n.Name, image: s.publicImage})
	s.waitPod(t, ctx, n, "tenant-b", "vouch-public", "Succeeded (public image)", succeeded(t))

	shim.stop()
	if code, out, err := shim.fsck(ctx); err != nil || code != 0 {
		t.Errorf("shim vouch-2: pullrecords fsck = %d, %v:\n%s", code, err, out)
	}
}

package originverify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The threat (issue 32): tenant A's private image, manifest digest D, is
// on the node. Tenant B, without credentials, asks for E/bob/x@D where E is
// a registry B controls. Each lie below is one E may tell; each must be
// refused, and a registry that really holds A's bytes must be accepted.

const bobRepo = "bob/x"

// tenantA is A's image: a small config and three 64 KiB layers.
func tenantA() image {
	return image{
		config: []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers"}}`),
		layers: [][]byte{pattern(1, 64<<10), pattern(2, 64<<10), pattern(3, 64<<10)},
	}
}

// scene is a node holding A's image and tenant B's registry E.
type scene struct {
	img      image
	manifest []byte
	digest   string
	node     *fakeContent
	e        *fakeRegistry
}

// newScene gives E nothing of A's; honest gives it A's bytes (the same
// image pushed to two registries).
func newScene(t *testing.T, honest bool) *scene {
	t.Helper()
	img := tenantA()
	manifest := img.manifest()
	sc := &scene{img: img, manifest: manifest, digest: digestOf(manifest), e: newFakeRegistry(t, anonymousAccess)}
	sc.node = contentOf(append(img.blobs(), manifest)...)
	if honest {
		sc.e.pushImage(bobRepo, "latest", img)
	}
	return sc
}

func (sc *scene) byDigest() string { return sc.e.host() + "/" + bobRepo + "@" + sc.digest }
func (sc *scene) byTag() string    { return sc.e.host() + "/" + bobRepo + ":latest" }

func (sc *scene) verifier(opts ...Option) *Verifier {
	return New(append([]Option{WithInsecureRegistries(sc.e.host()), WithContent(sc.node)}, opts...)...)
}

// vouch makes E answer D (by digest and as latest) with body, naming D in
// its digest header.
func (sc *scene) vouch(body []byte) {
	for _, key := range []string{bobRepo + "@" + sc.digest, bobRepo + ":latest"} {
		sc.e.manifests[key] = body
	}
	sc.e.answerDigest = sc.digest
}

// other is bytes of the same length as b that differ everywhere.
func other(b []byte) []byte {
	o := make([]byte, len(b))
	for i := range b {
		o[i] = b[i] ^ 0xff
	}
	return o
}

func TestLyingRegistryIsRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*scene)
		image func(*scene) string
		opts  []Option
		ctx   func() (context.Context, context.CancelFunc)
		want  error
		// wantInMsg are parts the message must hold.
		wantInMsg []string
	}{
		{name: "vouching: 200 and the digest, no manifest body",
			setup: func(sc *scene) { sc.vouch(sc.manifest); sc.e.noManifestBody = true },
			want:  ErrNotProven, wantInMsg: []string{"manifest " + "sha256:", "without the manifest's bytes"}},
		{name: "vouching: HEAD 200 and the digest, GET not found",
			setup: func(sc *scene) { sc.vouch(sc.manifest); sc.e.headOnly = true },
			want:  ErrNotFound, wantInMsg: []string{"404"}},
		{name: "vouching: 200 and the digest, another manifest body",
			setup: func(sc *scene) { sc.vouch(image{config: []byte("{}")}.manifest()) },
			want:  ErrNotProven, wantInMsg: []string{"the served bytes hash to sha256:"}},
		{name: "vouching: no digest header and a wrong body",
			setup: func(sc *scene) { sc.vouch([]byte(`{"schemaVersion":2}`)); sc.e.noDigestHeader = true },
			want:  ErrNotProven, wantInMsg: []string{"the served bytes hash to"}},
		{name: "a wrong manifest body, the header naming the digest asked",
			setup: func(sc *scene) {
				sc.e.pushImage(bobRepo, "latest", sc.img)
				sc.vouch(append(append([]byte(nil), sc.manifest...), ' '))
			},
			want: ErrNotProven, wantInMsg: []string{"hash to"}},
		{name: "a tag whose digest header names another digest",
			setup: func(sc *scene) {
				sc.e.pushImage(bobRepo, "latest", sc.img)
				sc.e.answerDigest = "sha256:" + strings.Repeat("2", 64)
			},
			image: (*scene).byTag, want: ErrNotProven, wantInMsg: []string{"answered digest sha256:222222222222… for bytes that hash to " + short(digestOf(tenantA().manifest()))}},
		{name: "ranges refused, other bytes in full",
			setup: func(sc *scene) {
				sc.e.pushImage(bobRepo, "latest", sc.img)
				sc.e.ignoreRanges = true
				sc.e.blobs[digestOf(sc.img.layers[1])] = other(sc.img.layers[1])
			},
			want: ErrNotProven, wantInMsg: []string{"layer 2 " + short(digestOf(tenantA().layers[1])), "the served bytes hash to"}},
		{name: "ranges refused, the blob over the cap",
			setup: func(sc *scene) { sc.e.pushImage(bobRepo, "latest", sc.img); sc.e.ignoreRanges = true },
			opts:  []Option{WithMaxBlobBytes(32 << 10)},
			want:  ErrNotProven, wantInMsg: []string{"layer 1 ", "the registry ignores range requests and the blob is 65536 bytes, over the 32768-byte cap"}},
		{name: "a range answered with other bytes",
			setup: func(sc *scene) {
				sc.e.pushImage(bobRepo, "latest", sc.img)
				sc.e.blobs[digestOf(sc.img.layers[2])] = other(sc.img.layers[2])
			},
			want: ErrNotProven, wantInMsg: []string{"layer 3 " + short(digestOf(tenantA().layers[2])) + " of manifest " + short(digestOf(tenantA().manifest())), "differ from the node's copy"}},
		{name: "a range answered for another offset",
			setup: func(sc *scene) { sc.e.pushImage(bobRepo, "latest", sc.img); sc.e.shiftRanges = 512 },
			want:  ErrNotProven, wantInMsg: []string{"layer 1 ", "the registry answered Content-Range"}},
		{name: "a truncated range (Content-Length longer than the body)",
			setup: func(sc *scene) {
				sc.e.pushImage(bobRepo, "latest", sc.img)
				sc.e.truncateBlobs = true
				delete(sc.node.blobs, digestOf(sc.img.config)) // so that a range is the first blob asked
			},
			want: ErrNotProven, wantInMsg: []string{"layer 1 ", "truncated"}},
		{name: "a truncated whole blob",
			setup: func(sc *scene) { sc.e.pushImage(bobRepo, "latest", sc.img); sc.e.truncateBlobs = true },
			want:  ErrNotProven, wantInMsg: []string{"config ", "the registry answers"}},
		{name: "a slow body",
			setup: func(sc *scene) { sc.e.pushImage(bobRepo, "latest", sc.img); sc.e.slowBlobs = true },
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 300*time.Millisecond)
			},
			want: ErrUnreachable, wantInMsg: []string{"config ", "deadline"}},
		{name: "a blob 404",
			setup: func(sc *scene) { sc.e.pushImage(bobRepo, "latest", sc.img); sc.e.blobStatus = http.StatusNotFound },
			want:  ErrNotProven, wantInMsg: []string{"config ", "the registry answered 404", "blob unknown"}},
		{name: "a config answered with other bytes",
			setup: func(sc *scene) {
				sc.e.pushImage(bobRepo, "latest", sc.img)
				sc.e.blobs[digestOf(sc.img.config)] = other(sc.img.config)
			},
			want: ErrNotProven, wantInMsg: []string{"config " + short(digestOf(tenantA().config)) + " of manifest", "the served bytes hash to"}},
		{name: "a manifest naming a blob the node holds with another size",
			setup: func(sc *scene) {
				m := manifestDoc{SchemaVersion: 2, MediaType: mediaTypeOCIManifest, Config: blobDescriptor("application/vnd.oci.image.config.v1+json", sc.img.config),
					Layers: []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: digestOf(sc.img.layers[0]), Size: 100}}}
				sc.e.pushImage(bobRepo, "", sc.img)
				sc.e.pushManifest(bobRepo, "latest", mediaTypeOCIManifest, mustJSON(m))
			},
			image: (*scene).byTag, want: ErrNotProven, wantInMsg: []string{"layer 1 ", "size 100 in the manifest, the node holds 65536 bytes"}},
		{name: "an index whose " + runtime.GOARCH + " child names a layer the node holds, with other bytes",
			setup: func(sc *scene) {
				sc.e.pushImage(bobRepo, "", sc.img)
				sc.e.pushManifest(bobRepo, "latest", mediaTypeOCIIndex, indexOf(
					indexChild{platform: &indexPlatform{OS: "linux", Architecture: runtime.GOARCH}, manifest: sc.manifest}))
				sc.e.blobs[digestOf(sc.img.layers[0])] = other(sc.img.layers[0])
			},
			image: (*scene).byTag, want: ErrNotProven, wantInMsg: []string{"layer 1 ", "differ from the node's copy"}},
		{name: "an index whose child of another platform is held by the node",
			setup: func(sc *scene) {
				mine := image{config: []byte(`{"os":"linux"}`), layers: [][]byte{[]byte("b's own layer")}}
				sc.e.pushImage(bobRepo, "", mine)
				sc.e.pushImage(bobRepo, "", sc.img)
				sc.e.pushManifest(bobRepo, "latest", mediaTypeOCIIndex, indexOf(
					indexChild{platform: &indexPlatform{OS: "linux", Architecture: runtime.GOARCH}, manifest: mine.manifest()},
					indexChild{platform: &indexPlatform{OS: "plan9", Architecture: "mips"}, manifest: sc.manifest}))
				sc.e.blobs[digestOf(sc.img.config)] = other(sc.img.config)
			},
			image: (*scene).byTag, want: ErrNotProven, wantInMsg: []string{"config ", "of manifest " + short(digestOf(tenantA().manifest())), "hash to"}},
		{name: "an index child whose bytes are not the descriptor's",
			setup: func(sc *scene) {
				sc.e.pushImage(bobRepo, "", sc.img)
				sc.e.pushManifest(bobRepo, "latest", mediaTypeOCIIndex, indexOf(
					indexChild{platform: &indexPlatform{OS: "linux", Architecture: runtime.GOARCH}, manifest: sc.manifest}))
				sc.e.manifests[bobRepo+"@"+sc.digest] = []byte(`{"schemaVersion":2}`)
			},
			image: (*scene).byTag, want: ErrNotProven, wantInMsg: []string{"manifest " + short(digestOf(tenantA().manifest())) + " (linux/" + runtime.GOARCH + ") of index", "hash to"}},
		{name: "a schema 1 manifest",
			setup: func(sc *scene) {
				sc.e.pushManifest(bobRepo, "latest", mediaTypeDockerSchema1JWS, []byte(`{"schemaVersion":1,"fsLayers":[]}`))
			},
			image: (*scene).byTag, want: ErrNotProven, wantInMsg: []string{"schema 1"}},
		{name: "an index naming more than 64 manifests",
			setup: func(sc *scene) {
				var children []indexChild
				for i := range maxManifests + 1 {
					m := image{config: fmt.Appendf(nil, `{"n":%d}`, i)}.manifest()
					sc.e.pushManifest(bobRepo, "", mediaTypeOCIManifest, m)
					children = append(children, indexChild{manifest: m})
				}
				sc.e.pushManifest(bobRepo, "latest", mediaTypeOCIIndex, indexOf(children...))
			},
			image: (*scene).byTag, want: ErrNotProven, wantInMsg: []string{"more than 64 manifests"}},
		{name: "indexes nested four deep",
			setup: func(sc *scene) {
				body := sc.manifest
				sc.e.pushImage(bobRepo, "", sc.img)
				for range maxIndexDepth + 1 {
					body = indexOf(indexChild{manifest: body, mediaType: mediaTypeOCIIndex})
					sc.e.pushManifest(bobRepo, "", mediaTypeOCIIndex, body)
				}
				sc.e.pushManifest(bobRepo, "latest", mediaTypeOCIIndex, body)
			},
			image: (*scene).byTag, want: ErrNotProven, wantInMsg: []string{"nested deeper than 3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScene(t, false)
			tc.setup(sc)
			image := sc.byDigest()
			if tc.image != nil {
				image = tc.image(sc)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			proof, err := sc.verifier(tc.opts...).Prove(ctx, image, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Prove = %+v, %v; want an error matching %v", proof, err, tc.want)
			}
			t.Logf("%v", err)
			if proof.Digest != "" {
				t.Errorf("a refusal returned digest %q", proof.Digest)
			}
			var oe *OriginError
			if !errors.As(err, &oe) || oe.Registry != sc.e.host() || oe.Repository != bobRepo {
				t.Errorf("error %#v does not name registry %s and repository %s", err, sc.e.host(), bobRepo)
			}
			if errors.Is(err, ErrNotProven) && !strings.Contains(err.Error(), "prove") {
				t.Errorf("a refusal for want of proof does not say so: %v", err)
			}
			for _, part := range tc.wantInMsg {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not contain %q", err, part)
				}
			}
		})
	}
}

func TestHonestRegistryIsAccepted(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*scene)
		image func(*scene) string
		opts  []Option
		want  Proof // Requests and BytesFetched not compared
	}{
		{name: "the same bytes by digest", want: Proof{Manifests: 1, BlobsChallenged: 3, BlobsFetched: 1}},
		{name: "the same bytes by tag", image: (*scene).byTag, want: Proof{Manifests: 1, BlobsChallenged: 3, BlobsFetched: 1}},
		{name: "no digest header, the bytes decide", setup: func(sc *scene) { sc.e.noDigestHeader = true },
			want: Proof{Manifests: 1, BlobsChallenged: 3, BlobsFetched: 1}},
		{name: "no digest header for a tag", setup: func(sc *scene) { sc.e.noDigestHeader = true }, image: (*scene).byTag,
			want: Proof{Manifests: 1, BlobsChallenged: 3, BlobsFetched: 1}},
		{name: "ranges ignored, the whole blobs hashed", setup: func(sc *scene) { sc.e.ignoreRanges = true },
			want: Proof{Manifests: 1, BlobsFetched: 4}},
		{name: "an index: the node's platform walked, another not",
			setup: func(sc *scene) {
				elsewhere := image{config: []byte(`{"os":"plan9"}`), layers: [][]byte{[]byte("never asked")}}
				sc.e.pushImage(bobRepo, "", elsewhere)
				sc.e.pushManifest(bobRepo, "multi", mediaTypeOCIIndex, indexOf(
					indexChild{platform: &indexPlatform{OS: "plan9", Architecture: "mips"}, manifest: elsewhere.manifest()},
					indexChild{platform: &indexPlatform{OS: "linux", Architecture: runtime.GOARCH, Variant: "v9"}, manifest: sc.manifest}))
			},
			image: func(sc *scene) string { return sc.e.host() + "/" + bobRepo + ":multi" },
			want:  Proof{Manifests: 2, BlobsChallenged: 3, BlobsFetched: 1}},
		{name: "WithPlatforms picks the child",
			setup: func(sc *scene) {
				sc.e.pushManifest(bobRepo, "multi", mediaTypeOCIIndex, indexOf(
					indexChild{platform: &indexPlatform{OS: "plan9", Architecture: "mips"}, manifest: sc.manifest}))
				delete(sc.node.blobs, sc.digest) // the node does not hold the child: only the platform picks it
			},
			image: func(sc *scene) string { return sc.e.host() + "/" + bobRepo + ":multi" },
			opts:  []Option{WithPlatforms(Platform{OS: "plan9", Architecture: "mips"})},
			want:  Proof{Manifests: 2, BlobsChallenged: 3, BlobsFetched: 1}},
		{name: "the node's content cannot be asked: every blob fetched whole",
			setup: func(sc *scene) { sc.node.sizeErr = errors.New("store down") },
			want:  Proof{Manifests: 1, BlobsFetched: 4}},
		{name: "the node's copy cannot be read: the challenged blobs fetched whole",
			setup: func(sc *scene) { sc.node.readErr = errors.New("store down") },
			want:  Proof{Manifests: 1, BlobsFetched: 4}},
		{name: "no content (CRI-O): every blob fetched whole",
			opts: []Option{WithContent(nil)},
			want: Proof{Manifests: 1, BlobsFetched: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScene(t, true)
			if tc.setup != nil {
				tc.setup(sc)
			}
			image := sc.byDigest()
			if tc.image != nil {
				image = tc.image(sc)
			}
			proof, err := sc.verifier(tc.opts...).Prove(context.Background(), image, nil)
			if err != nil {
				t.Fatalf("Prove: %v", err)
			}
			tc.want.Digest = sc.digest
			if strings.HasSuffix(image, ":multi") {
				tc.want.Digest = digestOf(sc.e.manifests[bobRepo+":multi"])
			}
			got := proof
			got.Requests, got.BytesFetched = 0, 0
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Proof (-want +got):\n%s", diff)
			}
			if proof.Requests == 0 || proof.BytesFetched == 0 {
				t.Errorf("the cost was not counted: %+v", proof)
			}
			for _, r := range sc.e.requests() {
				if strings.Contains(r.Path, "never") {
					t.Errorf("asked for %s", r.Path)
				}
			}
		})
	}
}

// A blob the node does not hold is never asked for: the runtime fetches
// it and checks its digest itself.
func TestBlobsTheNodeDoesNotHoldAreNotRequested(t *testing.T) {
	sc := newScene(t, true)
	sc.node = contentOf(sc.img.layers[1])
	proof, err := sc.verifier().Prove(context.Background(), sc.byDigest(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if proof.BlobsChallenged != 1 || proof.BlobsFetched != 0 {
		t.Errorf("proof %+v, want one blob challenged and none fetched", proof)
	}
	held := "/blobs/" + digestOf(sc.img.layers[1])
	for _, r := range sc.e.requests() {
		if strings.Contains(r.Path, "/blobs/") && !strings.HasSuffix(r.Path, held) {
			t.Errorf("asked for %s, which the node does not hold", r.Path)
		}
		if strings.HasSuffix(r.Path, held) && !strings.HasPrefix(r.Range, "bytes=") {
			t.Errorf("the held layer was asked without a range: %+v", r)
		}
	}
}

// Control: a registry that holds the same 50 layers the node holds proves
// it with two 256-byte ranges each, under 64 KiB beyond the manifest.
func TestProofOfFiftyLayersIsCheap(t *testing.T) {
	img := image{config: []byte(`{"os":"linux"}`)}
	for i := range 50 {
		img.layers = append(img.layers, pattern(byte(10+i), 8<<10))
	}
	e := newFakeRegistry(t, bearerAuth)
	e.addUser(alice, alicePass, bobRepo)
	digest := e.pushImage(bobRepo, "v1", img)
	manifest := img.manifest()
	v := New(WithInsecureRegistries(e.host()), WithContent(contentOf(append(img.blobs(), manifest)...)))
	proof, err := v.Prove(context.Background(), e.host()+"/"+bobRepo+":v1", password(alice, alicePass))
	if err != nil {
		t.Fatal(err)
	}
	if proof.Digest != digest || proof.Manifests != 1 || proof.BlobsChallenged != 50 || proof.BlobsFetched != 1 {
		t.Errorf("proof %+v, want digest %s, 1 manifest, 50 blobs challenged and the config fetched", proof, digest)
	}
	if limit := int64(64<<10 + len(manifest)); proof.BytesFetched >= limit {
		t.Errorf("%d bytes fetched, want under %d", proof.BytesFetched, limit)
	}
	// One token flow serves the whole verification.
	var tokens int
	for _, r := range e.requests() {
		if r.Path == "/token" {
			tokens++
		}
	}
	if tokens != 1 {
		t.Errorf("%d token requests, want 1", tokens)
	}
	t.Logf("%+v", proof)
}

// Blobs redirected to another host (a CDN) are followed over HTTPS without
// the credential; over plain HTTP they are refused.
func TestBlobRedirects(t *testing.T) {
	img := tenantA()
	cdn := newFakeRegistry(t, anonymousAccess)
	cdn.server.Close()
	cdnTLS := quietTLSServer(t, http.HandlerFunc(cdn.serve))
	cdn.pushImage(bobRepo, "", img)
	plain := newFakeRegistry(t, anonymousAccess)
	plain.pushImage(bobRepo, "", img)

	for _, tc := range []struct {
		name string
		to   string
		want error
	}{{"https", cdnTLS.URL, nil}, {"plain http", plain.server.URL, ErrUnreachable}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeRegistry(t, basicAuth)
			e.addUser(alice, alicePass, bobRepo)
			e.pushImage(bobRepo, "v1", img)
			e.blobRedirect = tc.to
			before := len(cdn.requests())
			v := New(WithInsecureRegistries(e.host()), WithTransport(cdnTLS.Client().Transport),
				WithContent(contentOf(img.blobs()...)))
			proof, err := v.Prove(context.Background(), e.host()+"/"+bobRepo+":v1", password(alice, alicePass))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Prove = %+v, %v; want %v", proof, err, tc.want)
			}
			var sentToOrigin bool
			for _, r := range e.requests() {
				sentToOrigin = sentToOrigin || (strings.Contains(r.Path, "/blobs/") && r.Authorization != "")
			}
			if !sentToOrigin {
				t.Errorf("the origin never got an authenticated blob request: %+v", e.requests())
			}
			if tc.want == nil {
				reached := cdn.requests()[before:]
				if len(reached) == 0 {
					t.Fatal("the CDN was never asked")
				}
				for _, r := range reached {
					if r.Authorization != "" {
						t.Errorf("the CDN got an Authorization header: %+v", r)
					}
				}
				return
			}
			if !strings.Contains(err.Error(), "refused") || len(plain.requests()) != 0 {
				t.Errorf("plain HTTP redirect: %v, plain host asked %d times", err, len(plain.requests()))
			}
		})
	}
}

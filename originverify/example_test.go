package originverify_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/originverify"
)

func sha256Digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

// A registry on 127.0.0.1 that lets robot:s3cret pull team/app:v1 (a
// config and one layer) and nothing else. With vouch set it plays a
// registry that holds none of the bytes and only vouches for the digest.
func exampleRegistry(vouch *bool) (srv *httptest.Server, digest string) {
	config := []byte(`{"architecture":"amd64","os":"linux"}`)
	layer := []byte("the layer's bytes")
	manifest := []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",`+
		`"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":%d},`+
		`"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":%q,"size":%d}]}`,
		sha256Digest(config), len(config), sha256Digest(layer), len(layer)))
	digest = sha256Digest(manifest)
	blobs := map[string][]byte{
		"/v2/team/app/manifests/v1":                  manifest,
		"/v2/team/app/manifests/" + digest:           manifest,
		"/v2/team/app/blobs/" + sha256Digest(config): config,
		"/v2/team/app/blobs/" + sha256Digest(layer):  layer,
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "robot" || pass != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="example"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		body, ok := blobs[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if strings.Contains(r.URL.Path, "/manifests/") {
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", digest)
			if *vouch {
				return // 200 and the digest, but not the bytes
			}
		}
		_, _ = w.Write(body)
	})), digest
}

// A shim asks the image's own registry, with the pod's credential, for the
// proof that the credential may pull the image and that the registry holds
// its bytes, before it lets the runtime pull (maybe from a mirror that asks
// for nothing, or from the blobs the node already holds).
func Example() {
	vouch := false
	srv, want := exampleRegistry(&vouch)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	// Without WithContent every blob is fetched whole and hashed; a node
	// gives its runtime's content store, and only the blobs it holds are
	// challenged, by two random 256-byte ranges each.
	v := originverify.New(originverify.WithInsecureRegistries(host))
	ctx := context.Background()
	robot := &imageruntime.AuthConfig{Username: "robot", Password: "s3cret"}

	proof, err := v.Prove(ctx, host+"/team/app:v1", robot)
	fmt.Println("robot:", proof.Digest == want, err)
	fmt.Printf("manifests %d, blobs fetched %d, challenged %d\n", proof.Manifests, proof.BlobsFetched, proof.BlobsChallenged)

	_, err = v.Verify(ctx, host+"/team/app:v1", &imageruntime.AuthConfig{Username: "robot", Password: "guess"})
	fmt.Println("wrong password denied:", errors.Is(err, originverify.ErrDenied))

	// A credential for another registry is not sent: the pull is anonymous.
	_, err = v.Verify(ctx, host+"/team/app:v1", &imageruntime.AuthConfig{Username: "robot", Password: "s3cret", ServerAddress: "other.example"})
	fmt.Println("credential for another registry denied:", errors.Is(err, originverify.ErrDenied))

	_, err = v.Verify(ctx, host+"/team/other:v1", robot)
	fmt.Println("other repository not found:", errors.Is(err, originverify.ErrNotFound))

	// A registry that says yes and names the digest, without the bytes.
	vouch = true
	_, err = v.Verify(ctx, host+"/team/app@"+want, robot)
	fmt.Println("vouching without the bytes not proven:", errors.Is(err, originverify.ErrNotProven))
	// Output:
	// robot: true <nil>
	// manifests 1, blobs fetched 2, challenged 0
	// wrong password denied: true
	// credential for another registry denied: true
	// other repository not found: true
	// vouching without the bytes not proven: true
}

func ExampleRegistryHost() {
	host, _ := originverify.RegistryHost("busybox:1.36")
	fmt.Println(host)
	host, _ = originverify.RegistryHost("Registry.Example:5000/team/app@sha256:" + strings.Repeat("0", 64))
	fmt.Println(host)
	// Output:
	// docker.io
	// registry.example:5000
}

package originverify_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/originverify"
)

// A registry on 127.0.0.1 that lets robot:s3cret pull team/app:v1 and
// nothing else.
func exampleRegistry() *httptest.Server {
	const manifest = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}`
	const digest = "sha256:0d3f0a2a55a6e1a4e7c54b5b32ab1a5bf7e2e5e0d9c1f0b7d0c8b4e1a3d2f6c9"
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "robot" || pass != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="example"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/v2/team/app/manifests/v1" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Content-Length", fmt.Sprint(len(manifest)))
		w.Header().Set("Docker-Content-Digest", digest)
	}))
}

// A shim asks the image's own registry, with the pod's credential, before
// it lets the runtime pull (maybe from a mirror that asks for nothing).
func Example() {
	srv := exampleRegistry()
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	v := originverify.New(originverify.WithInsecureRegistries(host))
	ctx := context.Background()

	digest, err := v.Verify(ctx, host+"/team/app:v1", &imageruntime.AuthConfig{Username: "robot", Password: "s3cret"})
	fmt.Println("robot:", digest[:19], err)

	_, err = v.Verify(ctx, host+"/team/app:v1", &imageruntime.AuthConfig{Username: "robot", Password: "guess"})
	fmt.Println("wrong password denied:", errors.Is(err, originverify.ErrDenied))

	// A credential for another registry is not sent: the pull is anonymous.
	_, err = v.Verify(ctx, host+"/team/app:v1", &imageruntime.AuthConfig{Username: "robot", Password: "s3cret", ServerAddress: "other.example"})
	fmt.Println("credential for another registry denied:", errors.Is(err, originverify.ErrDenied))

	_, err = v.Verify(ctx, host+"/team/other:v1", &imageruntime.AuthConfig{Username: "robot", Password: "s3cret"})
	fmt.Println("other repository not found:", errors.Is(err, originverify.ErrNotFound))
	// Output:
	// robot: sha256:0d3f0a2a55a6 <nil>
	// wrong password denied: true
	// credential for another registry denied: true
	// other repository not found: true
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

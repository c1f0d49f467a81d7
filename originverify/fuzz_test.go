package originverify

import (
	"context"
	"errors"
	"testing"
)

// FuzzManifestWalk serves any bytes as a tag's manifest (and as the one
// child manifest a registry holds) and walks them: a verification never
// panics, refuses with an *OriginError, or accepts with the sha256 of the
// bytes served.
func FuzzManifestWalk(f *testing.F) {
	img := image{config: []byte(`{"os":"linux"}`), layers: [][]byte{pattern(7, 8<<10)}}
	child := img.manifest()
	f.Add(child, mediaTypeOCIManifest)
	f.Add(indexOf(indexChild{manifest: child}), mediaTypeOCIIndex)
	f.Add(indexOf(indexChild{platform: &indexPlatform{OS: "linux", Architecture: "amd64"}, manifest: child}), mediaTypeDockerList)
	f.Add([]byte(`{"schemaVersion":1}`), mediaTypeDockerSchema1JWS)
	f.Add([]byte(`{"schemaVersion":2,"manifests":[{"digest":"sha256:zz","size":-1}]}`), mediaTypeOCIIndex)
	f.Add([]byte(`{"config":{"digest":"sha512:00","size":1},"layers":[{}]}`), "")
	reg := newFakeRegistry(f, anonymousAccess)
	reg.pushImage(repoA, "", img)
	node := contentOf(append(img.blobs(), child)...)
	v := New(WithInsecureRegistries(reg.host()), WithContent(node))
	f.Fuzz(func(t *testing.T, body []byte, mediaType string) {
		tag := "fuzz"
		reg.mu.Lock()
		reg.manifests[repoA+":"+tag] = body
		reg.mediaTypes[repoA+":"+tag] = mediaType
		reg.mu.Unlock()
		proof, err := v.Prove(context.Background(), reg.host()+"/"+repoA+":"+tag, nil)
		if err != nil {
			var oe *OriginError
			if !errors.As(err, &oe) || oe.Err == nil {
				t.Fatalf("error %v is not an *OriginError with a sentinel", err)
			}
			return
		}
		if proof.Digest != digestOf(body) {
			t.Fatalf("accepted digest %s for bytes hashing to %s", proof.Digest, digestOf(body))
		}
	})
}

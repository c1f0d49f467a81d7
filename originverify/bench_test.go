package originverify

import (
	"context"
	"testing"
)

// BenchmarkVerify measures one verification against a fake registry on
// 127.0.0.1 (the manifest GET and, without a Content, the two small blobs
// fetched whole; basic: challenge and retry; bearer: also a token
// request), connections kept alive.
func BenchmarkVerify(b *testing.B) {
	for _, bc := range []struct {
		name string
		mode authMode
	}{{"anonymous", anonymousAccess}, {"basic", basicAuth}, {"bearer", bearerAuth}} {
		b.Run(bc.name, func(b *testing.B) {
			w := newWorld(b, bc.mode)
			auth := password(alice, alicePass)
			image := w.image(repoA, ":v1")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := w.verifier.Verify(ctx, image, auth); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProveHeldLayers measures the proof of an image whose 1, 10 or
// 50 layers (64 KiB each) the node holds: the manifest, the config whole
// and two 256-byte ranges per layer, against a bearer registry.
func BenchmarkProveHeldLayers(b *testing.B) {
	for _, layers := range []int{1, 10, 50} {
		b.Run(map[int]string{1: "layers=1", 10: "layers=10", 50: "layers=50"}[layers], func(b *testing.B) {
			img := image{config: []byte(`{"os":"linux"}`)}
			for i := range layers {
				img.layers = append(img.layers, pattern(byte(i), 64<<10))
			}
			reg := newFakeRegistry(b, bearerAuth)
			reg.addUser(alice, alicePass, repoA)
			reg.pushImage(repoA, "v1", img)
			v := New(WithInsecureRegistries(reg.host()), WithContent(contentOf(append(img.blobs(), img.manifest())...)))
			image := reg.host() + "/" + repoA + ":v1"
			ctx := context.Background()
			b.ReportAllocs()
			var proof Proof
			for b.Loop() {
				var err error
				if proof, err = v.Prove(ctx, image, password(alice, alicePass)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(proof.BytesFetched), "bytes/proof")
			b.ReportMetric(float64(proof.Requests), "requests/proof")
		})
	}
}

package originverify

import (
	"context"
	"testing"
)

// BenchmarkVerify measures one verification against a fake registry on
// 127.0.0.1 (one manifest HEAD; basic: challenge and retry; bearer: also a
// token request), connections kept alive.
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

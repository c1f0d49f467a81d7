package crishim

import (
	"context"
	"testing"
)

// The hit path: a digest reference whose verification is remembered.
func BenchmarkAdmitRemembered(b *testing.B) {
	f := newFixture(b, nil)
	f.verifier.allow(authA, privRepo, digest1)
	ctx := testContext(b)
	req := Request{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA}
	if _, err := f.gate.Admit(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a, err := f.gate.Admit(ctx, req)
			if err != nil || !a.Remembered {
				b.Fatalf("Admit = %+v, %v", a, err)
			}
		}
	})
}

// The same with the node's credential and a tag reference resolved by the
// runtime's digest.
func BenchmarkAdmitRememberedNodeTag(b *testing.B) {
	node, err := ParseNodeCredentials([]byte(`{"auths":{"registry.example.com":{"username":"node","password":"pw"}}}`))
	if err != nil {
		b.Fatal(err)
	}
	f := newFixture(b, func(c *Config) {
		c.Node = node
		c.Local = func(context.Context, string) (string, bool) { return digest1, true }
	})
	f.verifier.allow(node.For(privRepo), privRepo, digest1)
	ctx := testContext(b)
	req := Request{Image: privRepo + ":v1", Pod: tenantA}
	if _, err := f.gate.Admit(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if a, err := f.gate.Admit(ctx, req); err != nil || !a.Remembered {
			b.Fatalf("Admit = %+v, %v", a, err)
		}
	}
}

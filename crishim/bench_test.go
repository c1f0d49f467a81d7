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

// The remembered path allocates nothing: a pod credential by digest, and the
// node's credential by a tag the runtime holds.
func TestAdmitRememberedAllocatesNothing(t *testing.T) {
	node, err := ParseNodeCredentials([]byte(`{"auths":{"registry.example.com":{"username":"node","password":"pw"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) {
		c.Node = node
		c.Local = func(context.Context, string) (string, bool) { return digest1, true }
	})
	f.verifier.allow(authA, privRepo, digest1)
	f.verifier.allow(node.For(privRepo), privRepo, digest1)
	ctx := testContext(t)
	for _, req := range []Request{
		{Image: privRepo + "@" + digest1, Auth: authA, Pod: tenantA},
		{Image: privRepo + ":v1", Pod: tenantA},
	} {
		if _, err := f.gate.Admit(ctx, req); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if a, err := f.gate.Admit(ctx, req); err != nil || !a.Remembered {
				t.Fatalf("Admit(%s) = %+v, %v; want remembered", req.Image, a, err)
			}
		})
		if allocs != 0 {
			t.Errorf("Admit(%s) from memory allocates %v times, want 0", req.Image, allocs)
		}
	}
}

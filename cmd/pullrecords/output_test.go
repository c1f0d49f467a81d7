package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestEsc(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"registry.example/app:1.0", "registry.example/app:1.0"},
		{"é ü 日本 back\\slash", "é ü 日本 back\\slash"},
		{"red\x1b[31mtext", `red\x1b[31mtext`},
		{"line\nbreak\r\ttab", `line\nbreak\r\ttab`},
		{"bell\x07nul\x00del\x7f", `bell\x07nul\x00del\x7f`},
		{"c1\u0085\u009b", `c1\u0085\u009b`},
		{"bidi\u202eevil\u2066x\u200f", `bidi\u202eevil\u2066x\u200f`},
		{"sep\u2028\u2029", `sep\u2028\u2029`},
		{"bad\xffutf8", `bad\xffutf8`},
	} {
		if got := esc(tc.in); got != tc.want {
			t.Errorf("esc(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := esc(tc.in); strings.ContainsAny(got, "\x1b\n\r\t\x00\x07\x7f\u0085\u202e") {
			t.Errorf("esc(%q) = %q still holds a control character", tc.in, got)
		}
	}
}

// Table rows escape every cell; a tab inside a cell cannot add a column.
func TestRowEscapes(t *testing.T) {
	var b bytes.Buffer
	row(&b, "a\tb", "c\x1b[2Jd")
	if got, want := b.String(), "a\\tb\tc\\x1b[2Jd\n"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
}

// marshalYAML writes what sigs.k8s.io/yaml writes for ordinary values, and
// unlike it accepts DEL and C1 characters, round-tripping every string.
func TestMarshalYAML(t *testing.T) {
	plain := lsOutput{
		Intents: []intentView{{Image: "nginx:1.27", File: "image_manager/pulling/x"}},
		Records: []recordView{{ImageRef: "sha256:a1", LastUpdated: "2026-03-02T09:00:00Z", Credentials: []credentialView{
			{Name: "docker.io/library/nginx", NodeWide: true},
			{Name: "y", Secrets: []secretView{{UID: "1", Namespace: "n", Name: "true", CredentialHash: "0123…"}}},
		}}},
		Unreadable: 3,
	}
	want, err := yaml.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalYAML(plain)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("marshalYAML differs from sigs.k8s.io/yaml (-want +got):\n%s", diff)
	}

	evil := lsOutput{Intents: []intentView{{Image: "a\x1b[31m\nb\x7fc\u0085d\u202ee\tf"}}, Records: []recordView{}}
	got, err = marshalYAML(evil)
	if err != nil {
		t.Fatalf("marshalYAML with control characters: %v", err)
	}
	var back lsOutput
	if err := yaml.UnmarshalStrict(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.Intents[0].Image != evil.Intents[0].Image {
		t.Errorf("round trip = %q, want %q", back.Intents[0].Image, evil.Intents[0].Image)
	}
	if bytes.ContainsAny(got, "\x1b\x7f") {
		t.Errorf("YAML output %q holds a raw control character", got)
	}
	// JSON stays exact too.
	data, _ := json.Marshal(evil)
	var jback lsOutput
	if err := json.Unmarshal(data, &jback); err != nil || jback.Intents[0].Image != evil.Intents[0].Image {
		t.Errorf("JSON round trip = %q, %v", jback.Intents[0].Image, err)
	}
}

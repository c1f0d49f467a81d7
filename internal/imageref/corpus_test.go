package imageref

import (
	"strings"
	"testing"
)

var (
	hex64  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	hex96  = hex64 + hex64[:32]
	hex128 = hex64 + hex64
	d256   = "sha256:" + hex64
	d384   = "sha384:" + hex96
	d512   = "sha512:" + hex128

	rep = strings.Repeat
)

// corpus is the hand-written list of awkward inputs; TestCorpus also crosses
// a set of names with a set of suffixes.
var corpus = []string{
	// empty, whitespace, control characters
	"",
	" ",
	"\t",
	"\n",
	"ubuntu ",
	" ubuntu",
	"ubuntu\n",
	"ubuntu:latest\n",
	"ubu ntu",
	"ubuntu\x00",
	"\x00",
	"ubuntu:\x7f",
	"ubuntu:la\ttest",

	// short and familiar names
	"a",
	"0",
	"_",
	"-",
	".",
	"/",
	":",
	"@",
	"ubuntu",
	"ubuntu:latest",
	"ubuntu:22.04",
	"ubuntu:",
	"ubuntu::latest",
	"ubuntu:latest:extra",
	"ubuntu@",
	"ubuntu@sha256:",
	"ubuntu:@" + d256,
	"ubuntu@" + d256,
	"ubuntu:latest@" + d256,
	"ubuntu@" + d256 + "@" + d256,
	"ubuntu@" + d256 + ":latest",
	"library/ubuntu",
	"library/ubuntu:latest",
	"library/library/ubuntu",
	"library",
	"library/",
	"library:tag",
	"myorg/app",
	"myorg/team/app:v1",
	"a/b/c/d/e/f/g/h",

	// docker.io, index.docker.io
	"docker.io",
	"docker.io/",
	"docker.io/ubuntu",
	"docker.io/ubuntu:latest",
	"docker.io/library/ubuntu",
	"docker.io/library/ubuntu:22.04@" + d256,
	"docker.io/library/a/b",
	"docker.io/myorg/app",
	"docker.io:443/ubuntu",
	"Docker.io/ubuntu",
	"DOCKER.IO/ubuntu",
	"index.docker.io",
	"index.docker.io/ubuntu",
	"index.docker.io/ubuntu:latest",
	"index.docker.io/library/ubuntu",
	"index.docker.io/myorg/app@" + d256,
	"index.docker.io/library/a/b",
	"index.docker.io:5000/ubuntu",
	"registry-1.docker.io/library/ubuntu",
	"docker.io/library/",
	"docker.io//ubuntu",

	// localhost, ports, IP addresses
	"localhost",
	"localhost:5000",
	"localhost/app",
	"localhost:5000/app",
	"localhost:5000/app:tag",
	"localhost/app@" + d256,
	"localhost:/app",
	"localhost:x/app",
	"Localhost/app",
	"localhost.localdomain/app",
	"localhostx/app",
	"example.com/app",
	"example.com:5000/app:1.0",
	"example.com:05000/app",
	"example.com:5000:6000/app",
	"example.com:/app",
	"example.com",
	"example.com:5000",
	"Example.COM/app",
	"example.com/App",
	"example.com/app/Sub",
	"ex-ample.com/app",
	"-example.com/app",
	"example-.com/app",
	"example..com/app",
	".example.com/app",
	"example.com./app",
	"ex--ample.com/app",
	"ex_ample.com/app",
	"ex_ample/app",
	"exa__mple/app",
	"127.0.0.1/app",
	"127.0.0.1:5000/app:tag",
	"256.256.256.256/app",
	"1.2.3/app",
	"[::1]/app",
	"[::1]:5000/app",
	"[::1]:5000/app:tag@" + d256,
	"[2001:db8::1]:5000/ns/app",
	"[2001:DB8::1]/app",
	"[::ffff:1.2.3.4]/app",
	"[fe80::1%eth0]/app",
	"[]/app",
	"[::1/app",
	"::1]/app",
	"[::1]",
	"[::1]:5000",
	"[::g]/app",
	"[::1]x/app",
	"[::1]:/app",
	"::1/app",
	"[::1]/App",
	"host:5000/app",
	"Host/app",
	"hOST/app",
	"host/App",
	"UPPER",
	"Upper:tag",
	"upper:TAG",
	"upper:_tag",
	"upper:.tag",
	"upper:-tag",

	// path component separators
	"a.b",
	"a..b",
	"a_b",
	"a__b",
	"a___b",
	"a-b",
	"a--b",
	"a-----b",
	"a._b",
	"a-_b",
	"a_-b",
	"a.-b",
	"a-.b",
	"a.",
	"a_",
	"a-",
	".a",
	"_a",
	"-a",
	"a/.b",
	"a/b.",
	"a/b_",
	"a//b",
	"a/",
	"/a",
	"a/b/",
	"a/b__c/d-e.f",
	"foo_bar.com/app",
	"foo_bar.com:5000/app",
	"foo.bar_baz/app",
	"a.b.c/d",

	// tags
	"app:" + rep("t", 127),
	"app:" + rep("t", 128),
	"app:" + rep("t", 129),
	"app:_" + rep("-", 127),
	"app:v1.0-rc_1",
	"app:v1+build",
	"app:v1/x",
	"app:ünicode",
	"app:🙂",
	"host:5000/app:v1",
	"host:5000/app:",
	"host:5000/app:v1:v2",

	// digests
	"app@sha256:" + hex64[:63],
	"app@sha256:" + hex64 + "0",
	"app@sha256:" + strings.ToUpper(hex64),
	"app@SHA256:" + hex64,
	"app@sha384:" + hex96,
	"app@sha384:" + hex64,
	"app@" + d512,
	"app@sha512:" + hex96,
	"app@sha1:" + hex64[:40],
	"app@md5:" + hex64[:32],
	"app@sha256+b64:" + hex64,
	"app@sha256:" + hex64[:63] + "g",
	"app@sha256",
	"app@:" + hex64,
	"app@sha256:",
	"app@sha256:" + hex64 + "\n",
	"app@" + d384,
	"app:tag@" + d512,
	d256,
	"@" + d256,
	":tag@" + d256,
	":tag",
	"sha256:" + hex64[:10],

	// identifiers
	hex64,
	hex64 + ":tag",
	hex64[:63],
	hex64 + "0",
	strings.ToUpper(hex64),
	"library/" + hex64,
	"docker.io/" + hex64,
	hex64 + "@" + d256,

	// unicode and other bytes
	"ubüntu",
	"ÜBUNTU/app",
	"ünicode.example/app",
	"example.com/ü",
	"\xff",
	"app\xff",
	"İ/app",
	"K/app", // Kelvin sign, lowercases to k
	"app/K",

	// lengths: the 255 limit is on the path, not the name
	rep("a", 255),
	rep("a", 256),
	rep("a", 247),
	rep("a", 248),
	"a/" + rep("b", 255),
	"a/" + rep("b", 256),
	"a_a/" + rep("b", 251),
	"a_a/" + rep("b", 252),
	"library/" + rep("a", 247),
	"library/" + rep("a", 248),
	"docker.io/" + rep("a", 247),
	"docker.io/" + rep("a", 248),
	"index.docker.io/" + rep("a", 248),
	"example.com/" + rep("a", 255),
	"example.com/" + rep("a", 256),
	rep("a", 1000) + ".example/app",
	rep("a.", 2000) + "example/app:tag@" + d256,
	"example.com:" + rep("9", 500) + "/app",
	"[" + rep(":", 500) + "]/app",
	rep("a/", 127) + "a",
	rep("a/", 128) + "a",
	rep("a/", 10000),
	rep("a", 100000),
	rep("a", 100000) + ":tag",
	rep("@", 1000),
	rep(":", 1000),
	rep("/", 1000),
}

// names and suffixes are crossed in TestCorpus.
var (
	names = []string{
		"a", "ubuntu", "library/ubuntu", "docker.io/ubuntu", "docker.io/library/ubuntu",
		"index.docker.io/ubuntu", "index.docker.io/x/y", "localhost/app", "localhost:5000/app",
		"example.com:443/a/b", "[::1]:5000/app", "[2001:db8::]/app", "Registry.Example/app",
		"UPPER/app", "app_/x", "a__b/c", "a_b.c/d", "myorg/app", hex64, rep("a", 248),
		"a/" + rep("b", 255), "",
	}
	suffixes = []string{
		"", ":tag", ":TAG", ":" + rep("t", 128), ":" + rep("t", 129), ":", "@" + d256, "@" + d384,
		"@" + d512, ":v1@" + d256, "@sha256:" + strings.ToUpper(hex64), "@md5:" + hex64[:32],
		"@", ":a@", "/", ":1/x", "@" + d256 + "x",
	}
)

func TestCorpus(t *testing.T) {
	if len(corpus) < 150 {
		t.Fatalf("corpus has %d entries, want at least 150", len(corpus))
	}
	n := 0
	for _, s := range corpus {
		compareAll(t, s)
		n++
	}
	for _, name := range names {
		for _, suffix := range suffixes {
			compareAll(t, name+suffix)
			n++
		}
	}
	t.Logf("%d inputs (%d hand-written)", n, len(corpus))
}

// Spot checks with the expected results written out, so that a wrong oracle
// cannot hide a wrong answer.
func TestExamples(t *testing.T) {
	for _, tc := range []struct {
		in                   string
		trim, norm, familiar string // "!" means not ok
	}{
		{"ubuntu", "ubuntu", "docker.io/library/ubuntu", "ubuntu"},
		{"ubuntu:22.04@" + d256, "ubuntu", "docker.io/library/ubuntu", "ubuntu"},
		{"myorg/app:v1", "myorg/app", "docker.io/myorg/app", "myorg/app"},
		{"index.docker.io/library/ubuntu", "index.docker.io/library/ubuntu", "docker.io/library/ubuntu", "ubuntu"},
		{"docker.io/library/a/b", "docker.io/library/a/b", "docker.io/library/a/b", "library/a/b"},
		{"Registry.Example:5000/app@" + d512, "Registry.Example:5000/app", "Registry.Example:5000/app", "Registry.Example:5000/app"},
		{"[::1]:5000/app:tag", "[::1]:5000/app", "[::1]:5000/app", "[::1]:5000/app"},
		{"localhost:5000", "localhost", "docker.io/library/localhost", "localhost"},
		// Valid, but the normalised path "a/b…" is 257 bytes.
		{"a/" + rep("b", 255), "a/" + rep("b", 255), "!", "!"},
		{"a/" + rep("b", 253), "a/" + rep("b", 253), "docker.io/a/" + rep("b", 253), "a/" + rep("b", 253)},
		{rep("a", 248), rep("a", 248), "!", "!"},
		{hex64, hex64, "!", "!"},
		{"Upper/app", "Upper/app", "Upper/app", "Upper/app"},
		{"app/Upper", "!", "!", "!"},
		{"app@sha256:" + strings.ToUpper(hex64), "!", "!", "!"},
		{"app@sha1:" + hex64[:40], "!", "!", "!"},
	} {
		check := func(fn string, got string, ok bool, want string) {
			t.Helper()
			if want == "!" {
				if ok {
					t.Errorf("%s(%q) = %q, want failure", fn, tc.in, got)
				}
			} else if !ok || got != want {
				t.Errorf("%s(%q) = %q, %v; want %q", fn, tc.in, got, ok, want)
			}
		}
		got, ok := TrimTagDigest(tc.in)
		check("TrimTagDigest", got, ok, tc.trim)
		got, ok = NormalizedName(tc.in)
		check("NormalizedName", got, ok, tc.norm)
		got, ok = FamiliarName(tc.in)
		check("FamiliarName", got, ok, tc.familiar)
		compareAll(t, tc.in)
	}
}

var sink string

func TestAllocs(t *testing.T) {
	inputs := []string{
		"ubuntu",
		"ubuntu:22.04",
		"registry.example.com:5000/team/app:v1.2.3@" + d256,
		"docker.io/library/ubuntu@" + d512,
		"index.docker.io/myorg/app:tag",
		"localhost/app",
		"[::1]:5000/app:tag",
		"Bad/Path",
	}
	for _, s := range inputs {
		if n := testing.AllocsPerRun(100, func() { TrimTagDigest(s) }); n != 0 {
			t.Errorf("TrimTagDigest(%q): %v allocs", s, n)
		}
		if n := testing.AllocsPerRun(100, func() { Valid(s) }); n != 0 {
			t.Errorf("Valid(%q): %v allocs", s, n)
		}
		if n := testing.AllocsPerRun(100, func() { FamiliarName(s) }); n != 0 {
			t.Errorf("FamiliarName(%q): %v allocs", s, n)
		}
		if n := testing.AllocsPerRun(100, func() { NormalizedNameParts(s) }); n != 0 {
			t.Errorf("NormalizedNameParts(%q): %v allocs", s, n)
		}
		want := 0.0
		if prefix, _, ok := NormalizedNameParts(s); ok && prefix != "" {
			want = 1
		}
		// Keep the result alive, or the compiler may build a short
		// concatenation on the stack.
		if n := testing.AllocsPerRun(100, func() { sink, _ = NormalizedName(s) }); n != want {
			t.Errorf("NormalizedName(%q): %v allocs, want %v", s, n, want)
		}
	}
}

package imageref

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Pieces that are valid or nearly valid in each position, so that random
// assembly lands near the grammar's edges far more often than byte-level
// mutation does.
var (
	genHosts = []string{
		"", "localhost", "localhost:5000", "docker.io", "index.docker.io", "Docker.io", "example.com",
		"example.com:443", "a", "A", "a-b", "a-", "-a", "a.b.c", "a..b", "a_b", "a_b.c", "127.0.0.1",
		"[::1]", "[::1]:5000", "[fe80::A]", "[]", "[::1", "host:", "host:x", "library", "x:1",
		strings.Repeat("h", 300) + ".io", "a__b", "UPPER",
	}
	genComponents = []string{
		"a", "b0", "library", "ubuntu", "a.b", "a_b", "a__b", "a___b", "a-b", "a---b", "a.", ".a", "a-",
		"_a", "a._b", "A", "aB", hex64, strings.Repeat("c", 100), strings.Repeat("d", 240), "", "ü", "a:b",
		"sha256", "docker.io", "index.docker.io", "localhost",
	}
	genTags = []string{
		"latest", "v1.0", "_", ".", "-", "A", "a" + strings.Repeat("b", 127), strings.Repeat("t", 129),
		"", "x/y", "a@b", "\n", "5000",
	}
	genDigests = []string{
		d256, d384, d512, "sha256:" + hex64[:63], "sha256:" + strings.ToUpper(hex64), "sha384:" + hex64,
		"sha512:" + hex96, "md5:" + hex64[:32], "SHA256:" + hex64, "sha256+b64:" + hex64, "", "sha256:",
		":" + hex64, "sha256:" + hex64 + "0",
	}
)

func pick(r *rand.Rand, xs []string) string { return xs[r.IntN(len(xs))] }

func genReference(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(2) == 0 {
		b.WriteString(pick(r, genHosts))
		b.WriteByte('/')
	}
	for n := r.IntN(4); ; n-- {
		b.WriteString(pick(r, genComponents))
		if n <= 0 {
			break
		}
		b.WriteByte('/')
	}
	if r.IntN(2) == 0 {
		b.WriteByte(':')
		b.WriteString(pick(r, genTags))
	}
	if r.IntN(3) == 0 {
		b.WriteByte('@')
		b.WriteString(pick(r, genDigests))
	}
	s := b.String()
	// Occasionally damage one byte.
	if len(s) > 0 && r.IntN(8) == 0 {
		bs := []byte(s)
		bs[r.IntN(len(bs))] = "/:@.-_aZ9 \x00"[r.IntN(11)]
		s = string(bs)
	}
	return s
}

// TestRandomized compares all functions with upstream on assembled inputs.
// IMAGEREF_RANDOM_N sets the number of inputs.
func TestRandomized(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	if v, err := strconv.Atoi(os.Getenv("IMAGEREF_RANDOM_N")); err == nil {
		n = v
	}
	seed := rand.Uint64()
	t.Logf("seed %d, %d inputs", seed, n)
	r := rand.New(rand.NewPCG(seed, 0))
	valid, normalized := 0, 0
	for i := 0; i < n && !t.Failed(); i++ {
		s := genReference(r)
		compareAll(t, s)
		if Valid(s) {
			valid++
		}
		if _, ok := NormalizedName(s); ok {
			normalized++
		}
	}
	t.Logf("%d valid, %d normalisable", valid, normalized)
}

// FuzzAssembled lets the fuzzer mutate the pieces of a reference separately.
func FuzzAssembled(f *testing.F) {
	f.Add("example.com:5000", "team/app", "v1", d256, uint8(0xff))
	f.Add("", "ubuntu", "latest", "", uint8(0x04))
	f.Add("index.docker.io", "library/a", "", d512, uint8(0x0b))
	f.Add("[::1]", "a__b/c", "_x", d384, uint8(0x0f))
	f.Fuzz(func(t *testing.T, host, path, tag, dgst string, flags uint8) {
		if len(host)+len(path)+len(tag)+len(dgst) > maxFuzzLen {
			t.Skip()
		}
		var b strings.Builder
		if flags&1 != 0 {
			b.WriteString(host)
			b.WriteByte('/')
		}
		b.WriteString(path)
		if flags&2 != 0 {
			b.WriteByte(':')
			b.WriteString(tag)
		}
		if flags&4 == 0 {
			b.WriteByte('@')
			b.WriteString(dgst)
		}
		compareAll(t, b.String())
	})
}

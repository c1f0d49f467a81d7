package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pr runs the command in this process and returns its output and status.
func pr(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return o.String(), e.String(), code
}

// bulkCache is a cache of n distinct images named by format (one %d).
func bulkCache(ns, name, format string, n int) cacheSpec {
	s := cacheSpec{Namespace: ns, Name: name, Images: make([]string, n)}
	for i := range s.Images {
		s.Images[i] = fmt.Sprintf(format, i)
	}
	return s
}

func writeJSON(t *testing.T, path string, v any) int {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return len(data)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The case of the report: a cache file under the 4 MiB input limit whose
// stored form exceeds it (150,000 images: compact in, indented out). It
// used to be acknowledged and stored, after which every cache command
// refused the stored file ("larger than 4 MiB") until it was removed by
// hand. It is refused now, naming the limit, the size and the largest
// cache; the previous declared file is untouched and every later command
// works.
func TestCacheApplyRefusesWhatCannotBeReadBack(t *testing.T) {
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet")
	if err := os.Mkdir(kubelet, 0o700); err != nil {
		t.Fatal(err)
	}
	declaredPath := filepath.Join(kubelet, "pullrecords", declaredFile)
	base := []string{"--kubelet-dir", kubelet, "cache"}
	small := filepath.Join(dir, "small.json")
	writeJSON(t, small, []cacheSpec{{Namespace: "shared", Name: "public", Images: []string{"nginx:1.27"}}})
	if out, errOut, code := pr(t, append(base, "apply", "-f", small)...); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	before := readFile(t, declaredPath)

	big := bulkCache("bulk", "images", "reg.example/i%06d", 150000)
	bigFile := filepath.Join(dir, "big.json")
	inSize := writeJSON(t, bigFile, []cacheSpec{big})
	stored, err := encodeDeclared([]cacheSpec{big, {Namespace: "shared", Name: "public", Images: []string{"nginx:1.27"}}})
	if err != nil {
		t.Fatal(err)
	}
	if inSize >= maxCacheFileSize || len(stored) <= maxCacheFileSize {
		t.Fatalf("input %d bytes, stored %d: want the input under and the stored form over %d", inSize, len(stored), maxCacheFileSize)
	}
	_, errOut, code := pr(t, append(base, "apply", "-f", bigFile)...)
	want := fmt.Sprintf(`^pullrecords: cache apply: the declared caches would take %d bytes in %s, over the limit for declared caches of 1 MiB \(1048576 bytes\) as stored; the largest is bulk/images \(150000 images, \d+ bytes\); nothing written: declare fewer images or delete caches\n$`,
		len(stored), regexp.QuoteMeta(declaredPath))
	if code != exitFailed || !regexp.MustCompile(want).MatchString(errOut) {
		t.Errorf("apply of the big file: exit %d, stderr %q\nwant %d, %s", code, errOut, exitFailed, want)
	}
	if after := readFile(t, declaredPath); !bytes.Equal(before, after) {
		t.Errorf("caches.json changed by a refused apply:\n%s", after)
	}

	// Every later command works.
	_, endpoint := startFakeCRI(t)
	for _, args := range [][]string{
		{"status"},
		{"run", "--once", "--cri", endpoint},
		{"apply", "-f", small},
		{"delete", "shared/public"},
		{"status"},
	} {
		if out, errOut, code := pr(t, append(base, args...)...); code != 0 {
			t.Errorf("cache %s after the refusal: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// sizedSpecs returns a cache whose declared file is exactly size bytes:
// images of one length, the last one's registry name padded.
func sizedSpecs(t *testing.T, size int) []cacheSpec {
	t.Helper()
	const format = "registry.example/img-%06d:1"
	measure := func(s cacheSpec) int {
		data, err := encodeDeclared([]cacheSpec{s})
		if err != nil {
			t.Fatal(err)
		}
		return len(data)
	}
	one := measure(bulkCache("edge", "images", format, 1))
	perImage := measure(bulkCache("edge", "images", format, 2)) - one
	s := bulkCache("edge", "images", format, 1+(size-one)/perImage)
	pad := size - measure(s)
	last := &s.Images[len(s.Images)-1]
	*last = "registry" + strings.Repeat("x", pad) + strings.TrimPrefix(*last, "registry")
	if got := measure(s); got != size {
		t.Fatalf("built %d bytes, want %d", got, size)
	}
	return []cacheSpec{s}
}

// At the limit exactly, the set is stored and reads back; one byte more is
// refused with errDeclaredTooLarge and nothing is written.
func TestDeclaredLimitBoundary(t *testing.T) {
	base := t.TempDir()
	p := cachePaths{base: base, state: filepath.Join(base, "imagecache")}
	if err := p.saveDeclared(sizedSpecs(t, maxDeclaredSize)); err != nil {
		t.Fatalf("saveDeclared at the limit: %v", err)
	}
	atLimit := readFile(t, p.declared())
	if len(atLimit) != maxDeclaredSize {
		t.Fatalf("stored %d bytes, want %d", len(atLimit), maxDeclaredSize)
	}
	if got, _, err := p.loadDeclared(); err != nil || len(got) != 1 {
		t.Fatalf("loadDeclared at the limit = %d caches, %v", len(got), err)
	}

	over := sizedSpecs(t, maxDeclaredSize+1)
	err := p.saveDeclared(over)
	var se *declaredSizeError
	if !errors.Is(err, errDeclaredTooLarge) || !errors.As(err, &se) {
		t.Fatalf("saveDeclared one byte over = %v, want errDeclaredTooLarge", err)
	}
	if se.size != maxDeclaredSize+1 || se.largest != "edge/images" || se.largestImages != len(over[0].Images) {
		t.Errorf("error = %+v", se)
	}
	if got := readFile(t, p.declared()); !bytes.Equal(got, atLimit) {
		t.Error("a refused save changed the declared file")
	}
}

// delete writes the declared file too, under the same limit: a declared
// file over it (an older version wrote it; it is still read up to 4 MiB)
// can only shrink under it.
func TestCacheDeleteUnderTheLimit(t *testing.T) {
	kubelet := t.TempDir()
	p := cachePaths{base: filepath.Join(kubelet, "pullrecords")}
	old := []cacheSpec{
		bulkCache("bulk", "images", "reg.example/i%06d", 60000),
		{Namespace: "shared", Name: "public", Images: []string{"nginx:1.27"}},
	}
	data, err := encodeDeclared(old)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) <= maxDeclaredSize || len(data) > maxCacheFileSize {
		t.Fatalf("%d bytes: want between the limits", len(data))
	}
	if err := os.MkdirAll(p.base, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.declared(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--kubelet-dir", kubelet, "cache"}
	if _, errOut, code := pr(t, append(base, "status")...); code != 0 {
		t.Fatalf("status of the old file: exit %d: %s", code, errOut)
	}
	_, errOut, code := pr(t, append(base, "delete", "shared/public")...)
	if code != exitFailed || !strings.Contains(errOut, "cache delete: the declared caches would take ") ||
		!strings.Contains(errOut, "the largest is bulk/images (60000 images, ") {
		t.Errorf("delete leaving the set over the limit: exit %d, %s", code, errOut)
	}
	if !bytes.Equal(readFile(t, p.declared()), data) {
		t.Error("a refused delete changed the declared file")
	}
	if _, errOut, code := pr(t, append(base, "delete", "bulk/images")...); code != 0 {
		t.Errorf("delete bringing the set under the limit: exit %d, %s", code, errOut)
	}
}

// cache apply --help states the limit.
func TestCacheApplyHelpStatesTheLimit(t *testing.T) {
	out, _, code := pr(t, "cache", "apply", "--help")
	want := regexp.MustCompile(`All declared caches together may take at most 1 MiB as stored in\s+<state dir>/caches\.json .* an apply or delete that\s+would store more is refused, naming the size and the largest cache, and\s+nothing is written\.`)
	if code != 0 || !want.MatchString(strings.Join(strings.Fields(out), " ")) {
		t.Errorf("cache apply --help (exit %d) does not state the limit:\n%s", code, out)
	}
}

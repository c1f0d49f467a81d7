package credstamp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func testKey(i int) Key {
	return Key{
		Credential: fmt.Sprintf("%064x", 1000+i),
		Repository: "registry.example.com/team/app",
		Digest:     fmt.Sprintf("sha256:%064x", i),
	}
}

func openAt(t *testing.T, dir string, c *testingclock.FakePassiveClock) *Store {
	t.Helper()
	s, err := Open(logr.Discard(), dir, WithClock(c))
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStampSurvivesReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "verified")
	c := testingclock.NewFakePassiveClock(t0)
	s := openAt(t, dir, c)
	k := testKey(1)
	if s.Fresh(k, time.Hour) {
		t.Fatalf("Fresh before any Stamp = true")
	}
	if err := s.Stamp(k); err != nil {
		t.Fatalf("Stamp: %v", err)
	}
	if !s.Fresh(k, time.Hour) {
		t.Fatalf("Fresh right after Stamp = false")
	}
	s.Close()

	c.SetTime(t0.Add(59 * time.Minute))
	again := openAt(t, dir, c)
	if !again.Fresh(k, time.Hour) {
		t.Errorf("after reopen, Fresh(%v, 1h) 59 minutes after the stamp = false, want true", k)
	}
	if again.Fresh(testKey(2), time.Hour) {
		t.Errorf("after reopen, a key never stamped is fresh")
	}
}

func TestFreshExpiresAfterTTL(t *testing.T) {
	c := testingclock.NewFakePassiveClock(t0)
	s := openAt(t, t.TempDir(), c)
	k := testKey(1)
	if err := s.Stamp(k); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after time.Duration
		ttl   time.Duration
		want  bool
	}{
		{0, time.Hour, true},
		{time.Hour - time.Nanosecond, time.Hour, true},
		{time.Hour, time.Hour, false},
		{time.Hour + time.Second, time.Hour, false},
		{0, 0, false},
		{0, -time.Second, false},
	} {
		c.SetTime(t0.Add(tc.after))
		if got := s.Fresh(k, tc.ttl); got != tc.want {
			t.Errorf("Fresh %v after the stamp with ttl %v = %v, want %v", tc.after, tc.ttl, got, tc.want)
		}
	}
}

// A clock set back must not make a stamp fresh for longer than ttl: a stamp
// dated in the future is stale, in memory and after reopen.
func TestFutureStampIsStale(t *testing.T) {
	dir := t.TempDir()
	c := testingclock.NewFakePassiveClock(t0)
	s := openAt(t, dir, c)
	k := testKey(1)
	if err := s.Stamp(k); err != nil {
		t.Fatal(err)
	}
	c.SetTime(t0.Add(-time.Second))
	if s.Fresh(k, time.Hour) {
		t.Errorf("Fresh with the clock one second before the stamp = true, want false")
	}
	s.Close()
	again := openAt(t, dir, c)
	if again.Fresh(k, time.Hour) {
		t.Errorf("after reopen, Fresh with the clock before the stamp = true, want false")
	}
	c.SetTime(t0)
	if !again.Fresh(k, time.Hour) {
		t.Errorf("after reopen, Fresh at the stamp's own time = false, want true")
	}
}

func TestKeysAreExact(t *testing.T) {
	c := testingclock.NewFakePassiveClock(t0)
	s := openAt(t, t.TempDir(), c)
	k := Key{Credential: "ab", Repository: "c", Digest: "sha256:1"}
	if err := s.Stamp(k); err != nil {
		t.Fatal(err)
	}
	for _, other := range []Key{
		{Credential: "a", Repository: "bc", Digest: "sha256:1"},
		{Credential: "ab", Repository: "c", Digest: "sha256:2"},
		{Credential: "ab", Repository: "d", Digest: "sha256:1"},
		{Credential: "anonymous", Repository: "c", Digest: "sha256:1"},
		{Credential: "AB", Repository: "c", Digest: "sha256:1"},
	} {
		if s.Fresh(other, time.Hour) {
			t.Errorf("stamp of %+v makes %+v fresh", k, other)
		}
		if other.fileName() == k.fileName() {
			t.Errorf("%+v and %+v share the file name %s", k, other, k.fileName())
		}
	}
	// Length prefixes keep fields from running together.
	a := Key{Credential: "x\x00", Repository: "y", Digest: "z"}
	b := Key{Credential: "x", Repository: "\x00y", Digest: "z"}
	if a.fileName() == b.fileName() {
		t.Errorf("%q and %q share a file name", a, b)
	}
}

func TestStampRejectsInvalidKeys(t *testing.T) {
	s := openAt(t, t.TempDir(), testingclock.NewFakePassiveClock(t0))
	for _, k := range []Key{
		{Repository: "r", Digest: "d"},
		{Credential: "c", Digest: "d"},
		{Credential: "c", Repository: "r"},
		{Credential: "c\xff", Repository: "r", Digest: "d"},
	} {
		if err := s.Stamp(k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Stamp(%q) = %v, want ErrInvalidKey", k, err)
		}
		if s.Fresh(k, time.Hour) {
			t.Errorf("after a refused Stamp(%q), Fresh = true", k)
		}
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("refused stamps left %d files", len(entries))
	}
}

func TestModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "verified")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, dir, testingclock.NewFakePassiveClock(t0))
	k := testKey(1)
	if err := s.Stamp(k); err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := di.Mode().Perm(); got != 0o700 {
		t.Errorf("directory mode %v, want 0700", got)
	}
	fi, err := os.Stat(filepath.Join(dir, k.fileName()))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("file mode %v, want 0600", got)
	}
}

// The file's exact content is the documented format.
func TestFileFormat(t *testing.T) {
	dir := t.TempDir()
	c := testingclock.NewFakePassiveClock(t0.Add(123456789 * time.Nanosecond))
	s := openAt(t, dir, c)
	k := Key{Credential: "anonymous", Repository: "docker.io/library/busybox", Digest: "sha256:abc"}
	if err := s.Stamp(k); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, k.fileName()))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"credential":"anonymous","repository":"docker.io/library/busybox","digest":"sha256:abc","verifiedAt":"2026-12-01T12:00:00.123456789Z"}` + "\n"
	if string(got) != want {
		t.Errorf("file content\n%s\nwant\n%s", got, want)
	}
}

// A time with no four-digit UTC year is refused on write rather than written
// in a form the reader rejects.
func TestEncodeRefusesYearsWithoutFourDigits(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(-1, 12, 31, 23, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("east", 3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if data, err := encodeStamp(testKey(1), at); err == nil {
			t.Errorf("encodeStamp at %v = %s, want an error", at, data)
		}
	}
	if _, err := encodeStamp(testKey(1), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Errorf("encodeStamp at year 0000 UTC: %v", err)
	}
}

// A file that is not exactly a valid stamp for its own name vouches for
// nothing after reopen.
func TestInvalidFilesVouchForNothing(t *testing.T) {
	k := testKey(1)
	other := testKey(2)
	valid, err := encodeStamp(k, t0)
	if err != nil {
		t.Fatal(err)
	}
	validOther, err := encodeStamp(other, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		content []byte
		symlink bool
	}{
		{name: "empty", content: nil},
		{name: "truncated", content: valid[:len(valid)/2]},
		{name: "garbled", content: append([]byte("\x00\x01"), valid[2:]...)},
		{name: "another key's stamp", content: validOther},
		{name: "unknown field", content: []byte(`{"version":1,"credential":"` + k.Credential + `","repository":"` + k.Repository + `","digest":"` + k.Digest + `","verifiedAt":"2026-12-01T12:00:00Z","ttl":"1000h"}`)},
		{name: "version 2", content: []byte(`{"version":2,"credential":"` + k.Credential + `","repository":"` + k.Repository + `","digest":"` + k.Digest + `","verifiedAt":"2026-12-01T12:00:00Z"}`)},
		{name: "time with a zone offset", content: []byte(`{"version":1,"credential":"` + k.Credential + `","repository":"` + k.Repository + `","digest":"` + k.Digest + `","verifiedAt":"2026-12-01T13:00:00+01:00"}`)},
		{name: "year zero east of UTC", content: []byte(`{"version":1,"credential":"` + k.Credential + `","repository":"` + k.Repository + `","digest":"` + k.Digest + `","verifiedAt":"0000-01-01T00:00:00+01:00"}`)},
		{name: "bad time", content: []byte(`{"version":1,"credential":"` + k.Credential + `","repository":"` + k.Repository + `","digest":"` + k.Digest + `","verifiedAt":"yesterday"}`)},
		{name: "trailing data", content: append(append([]byte{}, valid...), valid...)},
		{name: "json null", content: []byte("null")},
		{name: "too large", content: append(append([]byte{}, valid...), make([]byte, maxFileSize)...)},
		{name: "symlink to a valid stamp", symlink: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := testingclock.NewFakePassiveClock(t0)
			path := filepath.Join(dir, k.fileName())
			if tc.symlink {
				target := filepath.Join(t.TempDir(), "stamp")
				if err := os.WriteFile(target, valid, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			s := openAt(t, dir, c)
			if s.Fresh(k, time.Hour) {
				t.Errorf("a %s file makes its key fresh", tc.name)
			}
			if s.Fresh(other, time.Hour) {
				t.Errorf("a %s file makes another key fresh", tc.name)
			}
			removed, err := s.Prune(time.Hour)
			if err != nil || removed != 1 {
				t.Errorf("Prune = %d, %v; want 1, nil", removed, err)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after Prune, the %s file is still there (Lstat: %v)", tc.name, err)
			}
		})
	}
	// The valid content itself is trusted, so the cases above fail for
	// their defect only.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, k.fileName()), valid, 0o600); err != nil {
		t.Fatal(err)
	}
	if s := openAt(t, dir, testingclock.NewFakePassiveClock(t0)); !s.Fresh(k, time.Hour) {
		t.Errorf("a valid stamp file written by hand is not fresh")
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	c := testingclock.NewFakePassiveClock(t0)
	s := openAt(t, dir, c)
	old, recent := testKey(1), testKey(2)
	if err := s.Stamp(old); err != nil {
		t.Fatal(err)
	}
	c.SetTime(t0.Add(50 * time.Minute))
	if err := s.Stamp(recent); err != nil {
		t.Fatal(err)
	}
	// Another process's fresh stamp, and leftovers.
	foreign := testKey(3)
	data, _ := encodeStamp(foreign, t0.Add(40*time.Minute))
	if err := os.WriteFile(filepath.Join(dir, foreign.fileName()), data, 0o600); err != nil {
		t.Fatal(err)
	}
	temp := "." + testKey(4).fileName() + ".0123456789abcdef.tmp"
	for _, name := range []string{temp, "README"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	c.SetTime(t0.Add(70 * time.Minute))
	removed, err := s.Prune(time.Hour)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if removed != 2 {
		t.Errorf("Prune removed %d, want 2 (the expired stamp and the temporary file)", removed)
	}
	for name, want := range map[string]bool{
		old.fileName():     false,
		recent.fileName():  true,
		foreign.fileName(): true,
		temp:               false,
		"README":           true,
	} {
		_, err := os.Lstat(filepath.Join(dir, name))
		if got := err == nil; got != want {
			t.Errorf("after Prune, %s exists = %v, want %v", name, got, want)
		}
	}
	if s.Fresh(old, 24*time.Hour) {
		t.Errorf("a pruned stamp is still fresh in memory")
	}
	if !s.Fresh(recent, time.Hour) || !s.Fresh(foreign, time.Hour) {
		t.Errorf("Prune lost a fresh stamp: recent %v, foreign %v", s.Fresh(recent, time.Hour), s.Fresh(foreign, time.Hour))
	}
}

func TestConcurrentStampFreshPrune(t *testing.T) {
	c := testingclock.NewFakePassiveClock(t0)
	s := openAt(t, t.TempDir(), c)
	var wg sync.WaitGroup
	errs := make(chan error, 8*20)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				k := testKey(i % 5)
				if err := s.Stamp(k); err != nil {
					errs <- err
					return
				}
				if !s.Fresh(k, time.Hour) {
					errs <- fmt.Errorf("goroutine %d: key %d not fresh after its Stamp", g, i%5)
				}
				if i%7 == 0 {
					if _, err := s.Prune(time.Hour); err != nil {
						errs <- err
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestFreshAllocatesNothing(t *testing.T) {
	s := openAt(t, t.TempDir(), testingclock.NewFakePassiveClock(t0))
	k := testKey(1)
	if err := s.Stamp(k); err != nil {
		t.Fatal(err)
	}
	missing := testKey(2)
	allocs := testing.AllocsPerRun(1000, func() {
		if !s.Fresh(k, time.Hour) || s.Fresh(missing, time.Hour) {
			panic("wrong answer")
		}
	})
	if allocs != 0 {
		t.Errorf("Fresh allocates %v times per call, want 0", allocs)
	}
}

func BenchmarkFresh(b *testing.B) {
	s, err := Open(logr.Discard(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 1000 {
		if err := s.Stamp(testKey(i)); err != nil {
			b.Fatal(err)
		}
	}
	k := testKey(500)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !s.Fresh(k, time.Hour) {
				b.Fatal("not fresh")
			}
		}
	})
}

// Inherit copies a stamp's time, never a later one: the heir expires when
// the stamp it inherited would have, also after reopen, and an older or
// missing stamp gives nothing.
func TestInherit(t *testing.T) {
	dir := t.TempDir()
	c := testingclock.NewFakePassiveClock(t0)
	s := openAt(t, dir, c)
	from, to := testKey(1), testKey(2)
	if err := s.Inherit(to, from); err != nil {
		t.Fatalf("Inherit from a key never stamped: %v", err)
	}
	if s.Fresh(to, time.Hour) {
		t.Fatalf("inheriting from a key never stamped made the heir fresh")
	}
	if err := s.Stamp(from); err != nil {
		t.Fatal(err)
	}
	c.SetTime(t0.Add(40 * time.Minute))
	if err := s.Inherit(to, from); err != nil {
		t.Fatalf("Inherit: %v", err)
	}
	if !s.Fresh(to, time.Hour) {
		t.Fatalf("the heir is not fresh 40 minutes after the stamp it inherited (ttl 1h)")
	}
	s.Close()
	c.SetTime(t0.Add(time.Hour))
	s = openAt(t, dir, c)
	if s.Fresh(to, time.Hour) {
		t.Errorf("after reopen, the heir is fresh an hour after the inherited stamp: inheriting extended trust")
	}

	// A newer own stamp is kept: inheriting an older one changes nothing.
	if err := s.Stamp(to); err != nil {
		t.Fatal(err)
	}
	c.SetTime(t0.Add(90 * time.Minute))
	if err := s.Inherit(to, from); err != nil {
		t.Fatal(err)
	}
	if !s.Fresh(to, time.Hour) {
		t.Errorf("Inherit replaced the heir's newer stamp with an older one")
	}
	if err := s.Inherit(Key{}, from); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Inherit to an empty key: %v, want ErrInvalidKey", err)
	}
}

// A read-only store sees the stamps and changes nothing on disk: no
// directory made or narrowed, no write, no prune; a missing directory is a
// store of no stamps.
func TestOpenReadOnly(t *testing.T) {
	c := testingclock.NewFakePassiveClock(t0)
	dir := filepath.Join(t.TempDir(), "proofs")
	missing, err := OpenReadOnly(logr.Discard(), dir, WithClock(c))
	if err != nil {
		t.Fatalf("OpenReadOnly of a missing directory: %v", err)
	}
	if missing.Fresh(testKey(1), time.Hour) {
		t.Errorf("a missing directory vouches")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenReadOnly created %s: %v", dir, err)
	}
	missing.Close()

	w := openAt(t, dir, c)
	if err := w.Stamp(testKey(1)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	before := listDir(t, dir)
	ro, err := OpenReadOnly(logr.Discard(), dir, WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.Fresh(testKey(1), time.Hour) {
		t.Errorf("the read-only store does not see the stamp")
	}
	for name, err := range map[string]error{
		"Stamp":   ro.Stamp(testKey(2)),
		"Inherit": ro.Inherit(testKey(2), testKey(1)),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v, want ErrReadOnly", name, err)
		}
	}
	if _, err := ro.Prune(time.Nanosecond); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Prune on a read-only store: %v, want ErrReadOnly", err)
	}
	if after := listDir(t, dir); before != after {
		t.Errorf("the read-only store changed the directory:\nbefore %s\nafter  %s", before, after)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the read-only store changed the directory's mode: %v %v", fi.Mode(), err)
	}
}

func listDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		b.WriteString(e.Name() + "=" + string(data) + ";")
	}
	return b.String()
}

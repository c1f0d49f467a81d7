package fsstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
)

const (
	testdataKubelet = "../testdata/kubelet"
	testdataBroken  = "../testdata/broken"
)

// kubeletFile is one file of testdata/kubelet.
type kubeletFile struct {
	dir, name string
	data      []byte
}

func readKubeletTestdata(t *testing.T) []kubeletFile {
	t.Helper()
	var out []kubeletFile
	for _, d := range []string{IntentsDir, RecordsDir} {
		entries, err := os.ReadDir(filepath.Join(testdataKubelet, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(testdataKubelet, d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, kubeletFile{dir: d, name: e.Name(), data: data})
		}
	}
	if len(out) < 8 {
		t.Fatalf("only %d files in %s", len(out), testdataKubelet)
	}
	return out
}

const (
	alphaVersion = `"apiVersion":"kubelet.config.k8s.io/v1alpha1"`
	betaVersion  = `"apiVersion":"kubelet.config.k8s.io/v1beta1"`
)

// TestGoldenKubeletFiles decodes every kubelet-format file: v1beta1 files
// re-encode to exactly their bytes, v1alpha1 files to their bytes with only
// the apiVersion changed; every file is named after its key and sits in the
// directory of its kind.
func TestGoldenKubeletFiles(t *testing.T) {
	versions := map[string]int{}
	for _, f := range readKubeletTestdata(t) {
		t.Run(f.dir+"/"+f.name[:15], func(t *testing.T) {
			dec, err := accessor.Decode(f.data)
			if err != nil {
				t.Fatal(err)
			}
			versions[dec.Version]++
			if FileName(dec.Key()) != f.name {
				t.Errorf("file named %s holds key %q (name %s)", f.name, dec.Key(), FileName(dec.Key()))
			}
			var enc []byte
			switch f.dir {
			case IntentsDir:
				if dec.Intent == nil {
					t.Fatalf("%s in %s", dec.Kind, f.dir)
				}
				enc, err = accessor.EncodeIntent(dec.Intent)
			case RecordsDir:
				if dec.Record == nil {
					t.Fatalf("%s in %s", dec.Kind, f.dir)
				}
				enc, err = accessor.EncodePulledRecord(dec.Record)
			}
			if err != nil {
				t.Fatal(err)
			}
			want := f.data
			if dec.Version == accessor.VersionV1alpha1 {
				if bytes.Count(want, []byte(alphaVersion)) != 1 {
					t.Fatalf("v1alpha1 file without exactly one %s", alphaVersion)
				}
				want = bytes.Replace(want, []byte(alphaVersion), []byte(betaVersion), 1)
			}
			if diff := cmp.Diff(string(want), string(enc)); diff != "" {
				t.Errorf("re-encoded (-want +got):\n%s", diff)
			}
		})
	}
	if versions[accessor.VersionV1alpha1] == 0 || versions[accessor.VersionV1beta1] == 0 {
		t.Errorf("testdata covers versions %v, want both", versions)
	}
}

// TestGoldenBrokenFiles checks how each broken file fails, both in the codec
// and when stored under the record key "testimageref".
func TestGoldenBrokenFiles(t *testing.T) {
	tests := map[string]struct {
		decodeErr error // from accessor.Decode; nil = decodes
		// What GetImagePulledRecord("testimageref") gives for the file.
		wantFound bool
		wantErr   error
	}{
		"truncated":         {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"unknown-field":     {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"duplicate-field":   {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"wrong-kind":        {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"wrong-apiversion":  {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"old-group":         {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"old-secrets-field": {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"other-key":         {decodeErr: nil, wantFound: false},
		"empty":             {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"zeros":             {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"not-json":          {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"bad-time":          {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
		"missing-kind":      {decodeErr: accessor.ErrMalformed, wantFound: true, wantErr: accessor.ErrCorrupt},
	}
	entries, err := os.ReadDir(testdataBroken)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(tests) {
		t.Errorf("%d files in %s, %d in the table", len(entries), testdataBroken, len(tests))
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			tc, ok := tests[e.Name()]
			if !ok {
				t.Fatalf("no expectation for %s", e.Name())
			}
			data, err := os.ReadFile(filepath.Join(testdataBroken, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			_, err = accessor.Decode(data)
			if (tc.decodeErr == nil) != (err == nil) || !errors.Is(err, tc.decodeErr) {
				t.Errorf("Decode: %v, want %v", err, tc.decodeErr)
			}
			kubeletDir := t.TempDir()
			writeRaw(t, filepath.Join(recordsPath(kubeletDir), FileName("testimageref")), data)
			s := openStore(t, kubeletDir, WithoutSync())
			rec, found, err := s.GetImagePulledRecord("testimageref")
			if rec != nil || found != tc.wantFound || (tc.wantErr == nil) != (err == nil) || !errors.Is(err, tc.wantErr) {
				t.Errorf("Get = %v, %v, %v; want nil, %v, %v", rec, found, err, tc.wantFound, tc.wantErr)
			}
			// The bad file stays where it was: only Repair moves it.
			if _, err := os.Stat(filepath.Join(recordsPath(kubeletDir), FileName("testimageref"))); err != nil {
				t.Errorf("the broken file is gone after open: %v", err)
			}
		})
	}
}

// copyTree copies src into dst (files 0600, dirs 0700).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrationOfKubeletFiles opens a store on a copy of testdata/kubelet:
// v1alpha1 files are rewritten byte-for-byte except the apiVersion, v1beta1
// files are left untouched (same inode, same bytes), nothing else appears,
// and every file reads back.
func TestMigrationOfKubeletFiles(t *testing.T) {
	kubeletDir := t.TempDir()
	copyTree(t, testdataKubelet, filepath.Join(kubeletDir, DirName))
	files := readKubeletTestdata(t)
	inodes := map[string]os.FileInfo{}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(kubeletDir, DirName, f.dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		inodes[f.dir+"/"+f.name] = fi
	}
	s := openStore(t, kubeletDir, WithoutSync())
	migrated := 0
	for _, f := range files {
		p := filepath.Join(kubeletDir, DirName, f.dir, f.name)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := f.data
		if bytes.Contains(f.data, []byte(alphaVersion)) {
			want = bytes.Replace(f.data, []byte(alphaVersion), []byte(betaVersion), 1)
			migrated++
		} else if !os.SameFile(inodes[f.dir+"/"+f.name], fi) {
			t.Errorf("%s/%s: a v1beta1 file was rewritten", f.dir, f.name)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s/%s after open (-want +got):\n%s", f.dir, f.name, diff)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s/%s: mode %v", f.dir, f.name, fi.Mode().Perm())
		}
	}
	if migrated < 4 {
		t.Errorf("only %d v1alpha1 files in the testdata", migrated)
	}
	for _, d := range []string{IntentsDir, RecordsDir} {
		var want []string
		for _, f := range files {
			if f.dir == d {
				want = append(want, f.name)
			}
		}
		if diff := cmp.Diff(want, dirNames(t, filepath.Join(kubeletDir, DirName, d))); diff != "" {
			t.Errorf("%s after migration (-want +got):\n%s", d, diff)
		}
	}
	// Everything reads back; the first list (the open-time snapshot) equals
	// a list read from disk.
	first, err := s.ListImagePulledRecords()
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.ListImagePulledRecords()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("snapshot and disk lists differ (-snapshot +disk):\n%s", diff)
	}
	rec, found, err := s.GetImagePulledRecord("testimageref")
	if err != nil || !found {
		t.Fatalf("testimageref: %v, %v", found, err)
	}
	if got := rec.CredentialMapping["docker.io/testing/test"].KubernetesSecrets; len(got) != 1 || got[0].Name != "pull-secret" {
		t.Errorf("testimageref secrets = %+v", got)
	}
	for _, img := range []string{"docker.io/testing/test:latest", "repo.repo/test/test:v1", "docker.io/testing/test-alpha:latest"} {
		if ok, err := s.ImagePullIntentExists(img); !ok || err != nil {
			t.Errorf("intent %s: %v, %v", img, ok, err)
		}
	}
	if s.CountImagePullIntents() != 4 || s.CountImagePulledRecords() != 6 {
		t.Errorf("counts %d, %d", s.CountImagePullIntents(), s.CountImagePulledRecords())
	}
}

// TestMigrationMisnamedAndBroken covers the migration edge cases: a
// v1alpha1 file under another name is written to its proper name when that
// is free and left alone otherwise; undecodable files are left in place.
func TestMigrationMisnamedAndBroken(t *testing.T) {
	kubeletDir := t.TempDir()
	pulled := recordsPath(kubeletDir)
	alpha := func(r *accessor.ImagePulledRecord) []byte {
		return bytes.Replace(mustEncodeRecord(t, r), []byte(betaVersion), []byte(alphaVersion), 1)
	}
	free, taken := testRecord(1), testRecord(2)
	newer := testRecord(2)
	newer.CredentialMapping = nil
	writeRaw(t, filepath.Join(pulled, FileName("misnamed-free")), alpha(free))
	writeRaw(t, filepath.Join(pulled, FileName("misnamed-taken")), alpha(taken))
	writeRaw(t, filepath.Join(pulled, FileName(taken.ImageRef)), mustEncodeRecord(t, newer))
	brokenData, err := os.ReadFile(filepath.Join(testdataBroken, "old-secrets-field"))
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, filepath.Join(pulled, FileName("testimageref")), brokenData)

	s := openStore(t, kubeletDir, WithoutSync())
	for ref, want := range map[string]*accessor.ImagePulledRecord{free.ImageRef: free, taken.ImageRef: newer} {
		got, _, err := s.GetImagePulledRecord(ref)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", ref, diff)
		}
	}
	if data, err := os.ReadFile(filepath.Join(pulled, FileName("testimageref"))); err != nil || !bytes.Equal(data, brokenData) {
		t.Errorf("the undecodable file changed: %v", err)
	}
	// The misnamed originals stay (fsck reports them) and lists say so.
	_, err = s.ListImagePulledRecords()
	if !errors.Is(err, ErrKeyMismatch) || !errors.Is(err, accessor.ErrMalformed) {
		t.Errorf("list: %v", err)
	}
	var le *accessor.ListError
	if !errors.As(err, &le) || len(le.Errs) != 3 {
		t.Errorf("list error %v, want 3 bad files (two misnamed, one undecodable)", err)
	}
}

// TestMigrationLogsOnce checks the "Error migrating …" message: one per
// directory, with the count of files that failed.
func TestMigrationLogsOnce(t *testing.T) {
	kubeletDir := t.TempDir()
	for i := range 3 {
		writeRaw(t, filepath.Join(recordsPath(kubeletDir), FileName(fmt.Sprint("bad", i))), []byte("{"))
	}
	writeRaw(t, filepath.Join(intentsPath(kubeletDir), FileName("ok")), mustEncodeIntent(t, "ok"))
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	s, err := New(logger, kubeletDir, WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	if n := strings.Count(logs, "Error migrating image pulled records"); n != 1 {
		t.Errorf("%d migration error messages for records, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs, "failed=3") {
		t.Errorf("the message does not carry the count:\n%s", logs)
	}
	if strings.Contains(logs, "Error migrating image pull intents") {
		t.Errorf("a migration error for the clean intents directory:\n%s", logs)
	}
}

// TestMigrationUnderFaults fails each file-system operation of an open that
// migrates the kubelet testdata in turn: New either fails or succeeds, and
// a later clean open sees every file whole (old or migrated bytes) with no
// temporary file left.
func TestMigrationUnderFaults(t *testing.T) {
	files := readKubeletTestdata(t)
	for k := 1; ; k++ {
		if k > 500 {
			t.Fatal("open never completed")
		}
		kubeletDir := t.TempDir()
		copyTree(t, testdataKubelet, filepath.Join(kubeletDir, DirName))
		ctl := &faultCtl{}
		ctl.arm(k, false)
		s, err := New(testLogger(t), kubeletDir, WithoutSync(), withFaults(ctl))
		ops := ctl.ops()
		if err == nil {
			s.Close()
		} else if !errors.Is(err, errInjected) {
			t.Fatalf("k=%d: New: %v", k, err)
		}
		s2 := openStore(t, kubeletDir, WithoutSync())
		if tmps := tempFiles(t, kubeletDir); len(tmps) != 0 {
			t.Errorf("k=%d: temp files %v", k, tmps)
		}
		for _, f := range files {
			got, err := os.ReadFile(filepath.Join(kubeletDir, DirName, f.dir, f.name))
			if err != nil {
				t.Fatalf("k=%d: %v", k, err)
			}
			migrated := bytes.Replace(f.data, []byte(alphaVersion), []byte(betaVersion), 1)
			if !bytes.Equal(got, f.data) && !bytes.Equal(got, migrated) {
				t.Errorf("k=%d: %s/%s holds %q", k, f.dir, f.name, got)
			}
		}
		if _, err := s2.ListImagePulledRecords(); err != nil {
			t.Errorf("k=%d: %v", k, err)
		}
		s2.Close()
		if ops < k {
			break
		}
	}
}

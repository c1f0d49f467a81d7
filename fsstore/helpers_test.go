package fsstore

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
)

// testTime is a fixed whole-second UTC time for test records.
var testTime = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// testRecord returns a realistic record for n: a mapping with 1-3 names and
// a couple of secrets, a service account on some.
func testRecord(n int) *accessor.ImagePulledRecord {
	ref := fmt.Sprintf("sha256:%064x", n)
	r := &accessor.ImagePulledRecord{
		LastUpdatedTime:   metav1.NewTime(testTime.Add(time.Duration(n) * time.Second)),
		ImageRef:          ref,
		CredentialMapping: map[string]accessor.ImagePullCredentials{},
	}
	for j := range 1 + n%3 {
		name := fmt.Sprintf("registry.example.com/team-%d/app-%d", n%17, j)
		c := accessor.ImagePullCredentials{
			KubernetesSecrets: []accessor.ImagePullSecret{
				{UID: fmt.Sprintf("uid-%d-%d-a", n, j), Namespace: "ns-a", Name: "pull-secret", CredentialHash: fmt.Sprintf("%064x", n*7+j)},
				{UID: fmt.Sprintf("uid-%d-%d-b", n, j), Namespace: "ns-b", Name: "other-secret", CredentialHash: fmt.Sprintf("%064x", n*11+j)},
			},
		}
		if n%4 == 0 {
			c.KubernetesServiceAccounts = []accessor.ImagePullServiceAccount{{UID: fmt.Sprintf("sa-%d", n), Namespace: "ns-a", Name: "default"}}
		}
		r.CredentialMapping[name] = c
	}
	return r
}

func testLogger(t testing.TB) klog.Logger {
	return ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
}

// openStore opens a store on kubeletDir and closes it when the test ends.
func openStore(t testing.TB, kubeletDir string, opts ...Option) *Store {
	t.Helper()
	s, err := New(testLogger(t), kubeletDir, opts...)
	if err != nil {
		t.Fatalf("New(%s): %v", kubeletDir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func intentsPath(kubeletDir string) string {
	return filepath.Join(kubeletDir, DirName, IntentsDir)
}

func recordsPath(kubeletDir string) string {
	return filepath.Join(kubeletDir, DirName, RecordsDir)
}

// writeRaw writes data to path with mode 0600, creating parent directories.
func writeRaw(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustEncodeRecord(t testing.TB, r *accessor.ImagePulledRecord) []byte {
	t.Helper()
	data, err := accessor.EncodePulledRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustEncodeIntent(t testing.TB, image string) []byte {
	t.Helper()
	data, err := accessor.EncodeIntent(&accessor.ImagePullIntent{Image: image})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// tempFiles returns the names of temporary files in both directories.
func tempFiles(t testing.TB, kubeletDir string) []string {
	t.Helper()
	var out []string
	for _, d := range []string{intentsPath(kubeletDir), recordsPath(kubeletDir)} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), tempSuffix) {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	return out
}

// dirNames returns the sorted entry names of dir.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// walkAll returns every path under root, relative to it, with its type.
func walkAll(t testing.TB, root string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out[rel] = d.Type()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// byFileName sorts records as lists return them: by file name.
func byFileName(rs []*accessor.ImagePulledRecord) []*accessor.ImagePulledRecord {
	out := append([]*accessor.ImagePulledRecord(nil), rs...)
	slices.SortFunc(out, func(a, b *accessor.ImagePulledRecord) int {
		return strings.Compare(FileName(a.ImageRef), FileName(b.ImageRef))
	})
	return out
}

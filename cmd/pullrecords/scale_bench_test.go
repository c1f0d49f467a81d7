package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/fsstore/fsstoretest"
)

// The scale benchmarks run the read-only commands in process over a kubelet
// directory of N pulled records (and 100 intents), beside the cost of
// reading every file once:
//
//	go test -run '^$' -bench CLIScale -count=6 ./cmd/pullrecords
//	go test -run '^$' -bench CLIScale -count=3 ./cmd/pullrecords -scale.records=200000
//
// Sizes are -scale.records (comma-separated, default 10000), so that 200,000
// records run only when asked for. Fixtures are written into
// $PULLRECORDS_FIXTURES and kept there across runs when it is set (writing
// 200,000 files takes about a minute), else into the benchmark's temporary
// directory, once per run of the top-level benchmark.
//
// One record in 100 is a v1alpha1 file, so fsck reports problems (exit 1)
// and migrate has files to list.
var scaleRecords = flag.String("scale.records", "10000", "comma-separated record counts for BenchmarkCLIScale")

// scaleRecord is a record as a node has them: two image names, each pulled
// with one secret from a pool of 50 and one service account from a pool of 20.
func scaleRecord(i int) *accessor.ImagePulledRecord {
	r := &accessor.ImagePulledRecord{
		ImageRef:          "sha256:" + fmt.Sprintf("%x", sha256.Sum256([]byte(strconv.Itoa(i)))),
		LastUpdatedTime:   accessor.StorageTime(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)),
		CredentialMapping: map[string]accessor.ImagePullCredentials{},
	}
	for n := range 2 {
		secret, sa := (i+n)%50, (i+n)%20
		r.CredentialMapping[fmt.Sprintf("registry.example.com/team-%d/app-%d-%d", i%100, i, n)] = accessor.ImagePullCredentials{
			KubernetesSecrets: []accessor.ImagePullSecret{{
				UID:            fmt.Sprintf("0b6f8a1c-5d2e-4c1b-9a7f-%012d", secret),
				Namespace:      fmt.Sprintf("team-%d", secret),
				Name:           fmt.Sprintf("registry-credentials-%d", secret),
				CredentialHash: fmt.Sprintf("%064x", secret*7919+1),
			}},
			KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{{
				UID:       fmt.Sprintf("7c1d2e3f-4a5b-6c7d-8e9f-%012d", sa),
				Namespace: fmt.Sprintf("team-%d", sa),
				Name:      "image-puller",
			}},
		}
	}
	return r
}

// writeScaleFixture writes n records and 100 intents under dir as the
// kubelet would have, without a store.
func writeScaleFixture(dir string, n int) error {
	intents := make([]string, 100)
	for i := range intents {
		intents[i] = fmt.Sprintf("registry.example.com/team-%d/app:%d", i%17, i)
	}
	return fsstoretest.Fixture{
		Intents: intents,
		Records: n,
		Record:  scaleRecord,
		Edit: func(i int, data []byte) []byte {
			if i%100 != 7 {
				return data
			}
			return bytes.Replace(data, []byte("/"+accessor.VersionV1beta1+`"`), []byte("/"+accessor.VersionV1alpha1+`"`), 1)
		},
	}.Write(dir)
}

// scaleDir returns a kubelet directory holding n records.
func scaleDir(b *testing.B, n int) string {
	b.Helper()
	root := os.Getenv("PULLRECORDS_FIXTURES")
	if root == "" {
		root = b.TempDir()
	}
	dir := filepath.Join(root, fmt.Sprintf("cli-scale-v1-%d", n))
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err == nil {
		return dir
	}
	if err := writeScaleFixture(dir, n); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(done, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}

func scaleSizes(b *testing.B) []int {
	var out []int
	for _, f := range strings.Split(*scaleRecords, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("-scale.records %q: want positive integers", *scaleRecords)
		}
		out = append(out, n)
	}
	return out
}

// firstWrite records when its first non-empty write happened.
type firstWrite struct {
	at    atomic.Int64 // UnixNano, 0 until the first write
	bytes atomic.Int64
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.at.CompareAndSwap(0, time.Now().UnixNano())
	}
	f.bytes.Add(int64(len(p)))
	return len(p), nil
}

// readOnce reads every entry of both record directories whole, with
// workers goroutines: the floor under any command that looks at every file.
func readOnce(dir string, workers int) (int, error) {
	var names []string
	for _, sub := range []string{fsstore.IntentsDir, fsstore.RecordsDir} {
		p := filepath.Join(dir, fsstore.DirName, sub)
		entries, err := os.ReadDir(p)
		if err != nil {
			return 0, err
		}
		for _, e := range entries {
			names = append(names, filepath.Join(p, e.Name()))
		}
	}
	var next atomic.Int64
	var total atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) || errs[w] != nil {
					return
				}
				data, err := os.ReadFile(names[i])
				errs[w] = err
				total.Add(int64(len(data)))
			}
		})
	}
	wg.Wait()
	return int(total.Load()), errors.Join(errs...)
}

func BenchmarkCLIScale(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			dir := scaleDir(b, n)
			// Warm the page cache and the inode and dentry caches, so
			// that the first sub-benchmark does not pay for the others.
			if _, err := readOnce(dir, runtime.GOMAXPROCS(0)); err != nil {
				b.Fatal(err)
			}
			// A record that exists, one that does not.
			hit := scaleRecord(n / 2).ImageRef
			b.Run("readonce/serial", func(b *testing.B) {
				for b.Loop() {
					if _, err := readOnce(dir, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("readonce/parallel", func(b *testing.B) {
				for b.Loop() {
					if _, err := readOnce(dir, runtime.GOMAXPROCS(0)); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("readonce/raw-parallel", func(b *testing.B) {
				for b.Loop() {
					if _, err := readOnceRaw(dir, runtime.GOMAXPROCS(0)); err != nil {
						b.Fatal(err)
					}
				}
			})
			for _, c := range []struct {
				name string
				args []string
				exit int
			}{
				{"get", []string{"get", hit}, 0},
				{"get-missing", []string{"get", "sha256:missing"}, 1},
				{"ls", []string{"ls"}, 0},
				{"ls-byfile", []string{"ls", "--sort", "file"}, 0},
				{"ls-wide", []string{"-o", "wide", "ls"}, 0},
				{"ls-json", []string{"-o", "json", "ls"}, 0},
				{"ls-yaml", []string{"-o", "yaml", "ls"}, 0},
				{"fsck", []string{"fsck"}, 1},
				{"migrate", []string{"migrate"}, 0},
			} {
				b.Run(c.name, func(b *testing.B) {
					args := append([]string{"--kubelet-dir", dir}, c.args...)
					var firstRow time.Duration
					outputs := 0
					var stderr bytes.Buffer
					for b.Loop() {
						out := &firstWrite{}
						stderr.Reset()
						start := time.Now()
						if got := run(context.Background(), args, out, &stderr); got != c.exit {
							b.Fatalf("%v: exit %d, want %d; stderr: %s", c.args, got, c.exit, stderr.String())
						}
						if at := out.at.Load(); at != 0 {
							firstRow += time.Duration(at - start.UnixNano())
							outputs++
						}
					}
					// How long until the first byte of output: what a
					// streaming command improves.
					if outputs > 0 {
						b.ReportMetric(float64(firstRow.Microseconds())/1000/float64(outputs), "ms-to-first-output")
					}
				})
			}
		})
	}
}

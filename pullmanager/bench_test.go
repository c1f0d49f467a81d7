package pullmanager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distribution/reference"
	"github.com/go-logr/logr"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/memstore"
)

// Benchmarks mirror the kubelet's (pkg/kubelet/images/pullmanager/
// benchmarks_test.go, BenchmarkPullManagerMustAttemptImagePullFalse and
// ...True): MustAttemptImagePull hits
// (node-wide records under test.repo/org/<id>, AlwaysVerify) and misses (no
// record), 50..2,000 stored records extended to 20,000 and 100,000, serial
// and RunParallel; plus a secret match among 50 cached secrets, the durable
// pull cycle with fsync on, and start-up. The store is always the memstore
// cache over fsstore. Fixtures are built once per size (without fsync) in a
// directory removed at the end of the run.

var benchRecordCounts = []int{50, 100, 200, 500, 2_000, 20_000, 100_000}

const benchRequests = 4000

var (
	fixtureMu   sync.Mutex
	fixtureRoot string
	fixtures    = map[string]string{}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureRoot != "" {
		os.RemoveAll(fixtureRoot)
	}
	os.Exit(code)
}

func benchImage(i int) string { return fmt.Sprintf("test.repo/org/img-%08d:latest", i) }

// benchRef returns a digest-shaped imageRef, as random as a real one.
func benchRef(i int) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(i)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fixture returns a kubelet directory holding records node-wide records and
// intents intents (which match no runtime image), built once per shape.
func fixture(b *testing.B, records, intents int) string {
	b.Helper()
	fixtureMu.Lock()
	defer fixtureMu.Unlock()
	name := fmt.Sprintf("r%d-i%d", records, intents)
	if dir, ok := fixtures[name]; ok {
		return dir
	}
	if fixtureRoot == "" {
		root, err := os.MkdirTemp("", "pullmanager-bench")
		if err != nil {
			b.Fatal(err)
		}
		fixtureRoot = root
	}
	dir := filepath.Join(fixtureRoot, name)
	store, err := fsstore.New(logr.Discard(), dir, fsstore.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	logger := logr.Discard()
	at := accessor.StorageTime(t0)
	for i := range records {
		key, _ := MappingKey(benchImage(i))
		r := &accessor.ImagePulledRecord{LastUpdatedTime: at, ImageRef: benchRef(i),
			CredentialMapping: map[string]accessor.ImagePullCredentials{key: {NodePodsAccessible: true}}}
		if err := store.WriteImagePulledRecord(logger, r); err != nil {
			b.Fatal(err)
		}
	}
	for i := range intents {
		if err := store.WriteImagePullIntent(logger, fmt.Sprintf("leftover.repo/app-%d:1", i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := store.Close(); err != nil {
		b.Fatal(err)
	}
	fixtures[name] = dir
	return dir
}

func benchManager(b *testing.B, dir string, policy VerificationPolicy, opts ...fsstore.Option) (*PullManager, *memstore.Cache) {
	return benchManagerWith(b, dir, policy, nil, opts...)
}

func benchManagerWith(b *testing.B, dir string, policy VerificationPolicy, mopts []Option, opts ...fsstore.Option) (*PullManager, *memstore.Cache) {
	b.Helper()
	fs, err := fsstore.New(logr.Discard(), dir, opts...)
	if err != nil {
		b.Fatal(err)
	}
	cache, err := memstore.NewCache(logr.Discard(), fs)
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewImagePullCredentialVerificationPolicy(policy, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := logr.NewContext(context.Background(), logr.Discard())
	m, err := NewImagePullManager(ctx, cache, p, nil, mopts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fs.Close() })
	return m, cache
}

var noPodCreds GetPodCredentials = func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
	return nil, nil, nil
}

type benchRequest struct{ image, ref string }

func BenchmarkMustAttemptImagePull(b *testing.B) {
	ctx := logr.NewContext(context.Background(), logr.Discard())
	for _, kind := range []string{"hit", "miss"} {
		b.Run(kind, func(b *testing.B) {
			for _, n := range benchRecordCounts {
				b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
					benchCheck(b, ctx, kind, n)
				})
			}
		})
	}
}

func benchCheck(b *testing.B, ctx context.Context, kind string, n int) {
	m, _ := benchManager(b, fixture(b, n, 0), AlwaysVerify, fsstore.WithoutSync())
	reqs := make([]benchRequest, benchRequests)
	for i := range reqs {
		j := (i * 7919) % n
		reqs[i] = benchRequest{benchImage(j), benchRef(j)}
		if kind == "miss" {
			reqs[i].ref = benchRef(n + i)
		}
	}
	want := kind == "miss"
	for _, r := range reqs { // warm the name cache, check the fixture
		if got, _ := m.MustAttemptImagePull(ctx, r.image, r.ref, noPodCreds); got != want {
			b.Fatalf("%s %s: must pull %v", kind, r.image, got)
		}
	}
	runtime.GC() // do not time the collection of the fixture's garbage
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r := reqs[i%len(reqs)]
			if got, _ := m.MustAttemptImagePull(ctx, r.image, r.ref, noPodCreds); got != want {
				b.Fatal("wrong answer")
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				r := reqs[i%len(reqs)]
				if got, _ := m.MustAttemptImagePull(ctx, r.image, r.ref, noPodCreds); got != want {
					panic("wrong answer")
				}
				i++
			}
		})
	})
}

// BenchmarkMustAttemptImagePullDistinctNames: hits cycling through every
// one of 20,000 or 100,000 distinct image names (and records), so no name
// is checked twice within 20,000 checks: the cost of a name the process has
// not seen lately. With the kubelet's mapping keys nothing is cached;
// with WithNormalizedImageNames the name cache (16,384 entries) cannot hold
// the working set.
func BenchmarkMustAttemptImagePullDistinctNames(b *testing.B) {
	ctx := logr.NewContext(context.Background(), logr.Discard())
	for _, mode := range []string{"upstream", "normalized"} {
		for _, n := range []int{20_000, 100_000} {
			b.Run(fmt.Sprintf("%s/names=%d", mode, n), func(b *testing.B) {
				var mopts []Option
				if mode == "normalized" {
					mopts = append(mopts, WithNormalizedImageNames(true))
				}
				m, _ := benchManagerWith(b, fixture(b, n, 0), AlwaysVerify, mopts, fsstore.WithoutSync())
				reqs := make([]benchRequest, n)
				for i := range reqs {
					j := (i * 7919) % n // 7919 is prime: every name once per cycle
					reqs[i] = benchRequest{benchImage(j), benchRef(j)}
				}
				runtime.GC()
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					r := reqs[i%len(reqs)]
					if got, _ := m.MustAttemptImagePull(ctx, r.image, r.ref, noPodCreds); got {
						b.Fatal("wrong answer")
					}
					i++
				}
			})
		}
	}
}

// BenchmarkMustAttemptImagePullNeverSeenString: every check carries an
// image string the process has not seen lately (a new tag each time, of one
// of 50 recorded names), so the cost of parsing a new string is measured
// apart from the CPU-cache misses of a large record set. With the
// kubelet's mapping keys the tag is cut and the check is a hit; with
// WithNormalizedImageNames each string also passes through the name cache.
func BenchmarkMustAttemptImagePullNeverSeenString(b *testing.B) {
	ctx := logr.NewContext(context.Background(), logr.Discard())
	const records, distinct = 50, 1 << 20
	for _, mode := range []string{"upstream", "normalized"} {
		b.Run(mode, func(b *testing.B) {
			var mopts []Option
			if mode == "normalized" {
				mopts = append(mopts, WithNormalizedImageNames(true))
			}
			m, _ := benchManagerWith(b, fixture(b, records, 0), AlwaysVerify, mopts, fsstore.WithoutSync())
			reqs := make([]benchRequest, distinct)
			for i := range reqs {
				j := i % records
				reqs[i] = benchRequest{fmt.Sprintf("test.repo/org/img-%08d:v%d", j, i), benchRef(j)}
			}
			runtime.GC()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// After 2^20 checks the strings repeat: no cache here
				// holds anywhere near that many.
				r := reqs[i%len(reqs)]
				if got, _ := m.MustAttemptImagePull(ctx, r.image, r.ref, noPodCreds); got {
					b.Fatal("wrong answer")
				}
				i++
			}
		})
	}
}

// BenchmarkMappingKey: the key of a never-seen image string, against
// distribution/reference doing the same work (the kubelet's way).
func BenchmarkMappingKey(b *testing.B) {
	const image = "registry.example.com:5000/team-a/api-server:v1.2.3"
	b.Run("imageref", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := MappingKey(image); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("distribution-reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := referenceTrim(image); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMustAttemptImagePullWithMetrics: a hit at 2,000 records with
// every metric on (the check counter, the latency histogram, the lookup
// counters); it must not allocate either.
func BenchmarkMustAttemptImagePullWithMetrics(b *testing.B) {
	ctx := logr.NewContext(context.Background(), logr.Discard())
	fs, err := fsstore.New(logr.Discard(), fixture(b, 2_000, 0), fsstore.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fs.Close() })
	cache, err := memstore.NewCache(logr.Discard(), fs)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := NewImagePullCredentialVerificationPolicy(AlwaysVerify, nil)
	m, err := NewImagePullManager(ctx, cache, p, nil, WithMetrics(NewMetrics()))
	if err != nil {
		b.Fatal(err)
	}
	image, ref := benchImage(7), benchRef(7)
	if got, _ := m.MustAttemptImagePull(ctx, image, ref, noPodCreds); got {
		b.Fatal("fixture: must pull")
	}
	b.ReportAllocs()
	for b.Loop() {
		if got, _ := m.MustAttemptImagePull(ctx, image, ref, noPodCreds); got {
			b.Fatal("wrong answer")
		}
	}
}

// BenchmarkMustAttemptImagePullSecretMatch: the pod's secret is the last of
// 50 cached secrets (hash and coordinates match: no write).
func BenchmarkMustAttemptImagePullSecretMatch(b *testing.B) {
	ctx := logr.NewContext(context.Background(), logr.Discard())
	m, get := secretMatchScene(b, nil, nil)
	image, ref := secretMatchImage, secretMatchRef
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, _ := m.MustAttemptImagePull(ctx, image, ref, get); got {
				b.Fatal("wrong answer")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if got, _ := m.MustAttemptImagePull(ctx, image, ref, get); got {
					panic("wrong answer")
				}
			}
		})
	})
}

// BenchmarkDurablePullCycle: RecordPullIntent, then RecordImagePulled of a
// new imageRef (which removes the intent), with fsync on.
func BenchmarkDurablePullCycle(b *testing.B) {
	ctx := logr.NewContext(context.Background(), logr.Discard())
	for _, n := range []int{2_000, 20_000} {
		src := fixture(b, n, 0)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "kubelet")
			copyDir(b, src, dir)
			m, _ := benchManager(b, dir, NeverVerifyPreloadedImages)
			logger := logr.Discard()
			creds := &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{secret("u", "ns", "s", "h")}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				image := fmt.Sprintf("new.repo/app-%d:1", i)
				if err := m.RecordPullIntent(logger, image); err != nil {
					b.Fatal(err)
				}
				m.RecordImagePulled(ctx, image, fmt.Sprintf("sha256:new%060d", i), creds)
				i++
			}
		})
	}
}

// BenchmarkStartup: fsstore.New + memstore.NewCache + NewImagePullManager
// over 10,000 records and 100 leftover intents.
func BenchmarkStartup(b *testing.B) {
	dir := fixture(b, 10_000, 100)
	ctx := logr.NewContext(context.Background(), logr.Discard())
	policy, _ := NewImagePullCredentialVerificationPolicy(NeverVerifyPreloadedImages, nil)
	runtime := &fakeImages{images: []imageruntime.Image{{ID: "sha256:other", RepoTags: []string{"docker.io/library/other:1"}}}}
	b.ReportAllocs()
	for b.Loop() {
		fs, err := fsstore.New(logr.Discard(), dir, fsstore.WithoutSync())
		if err != nil {
			b.Fatal(err)
		}
		cache, err := memstore.NewCache(logr.Discard(), fs)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := NewImagePullManager(ctx, cache, policy, runtime); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		fs.Close() // a restart: the next open takes the writer lock again
		b.StartTimer()
	}
}

// referenceTrim is the kubelet's way to the mapping key, through
// distribution/reference, for comparison only.
func referenceTrim(image string) (string, error) {
	parsed, err := reference.Parse(image)
	if err != nil {
		return "", err
	}
	if d, ok := parsed.(reference.Digested); ok {
		image = strings.TrimSuffix(image, "@"+d.Digest().String())
	}
	if t, ok := parsed.(reference.Tagged); ok {
		image = strings.TrimSuffix(image, ":"+t.Tag())
	}
	return image, nil
}

// BenchmarkMustAttemptImagePullSecretMatchExpiry is the secret match above
// with credential expiry on: the same record and pod, plus the proof of the
// matched secret, looked up in the stamp store.
func BenchmarkMustAttemptImagePullSecretMatchExpiry(b *testing.B) {
	ctx := logr.NewContext(context.Background(), logr.Discard())
	stamps, err := credstamp.Open(logr.Discard(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stamps.Close() })
	m, get := secretMatchScene(b, []Option{WithCredentialExpiry(time.Hour, stamps)}, stamps)
	image, ref := secretMatchImage, secretMatchRef
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, _ := m.MustAttemptImagePull(ctx, image, ref, get); got {
				b.Fatal("wrong answer")
			}
		}
	})
}

// The image and imageRef of secretMatchScene.
const secretMatchImage, secretMatchRef = "registry.example/team/app:v1", "sha256:secretmatch"

// secretMatchScene is a manager (with mopts) over a record of 50 secrets,
// and a pod holding the 50th: the slowest secret match. With stamps, the
// matched secret's proof is stamped.
func secretMatchScene(b *testing.B, mopts []Option, stamps *credstamp.Store) (*PullManager, GetPodCredentials) {
	b.Helper()
	ctx := logr.NewContext(context.Background(), logr.Discard())
	m, cache := benchManagerWith(b, filepath.Join(b.TempDir(), "kubelet"), AlwaysVerify, mopts, fsstore.WithoutSync())
	var secrets []accessor.ImagePullSecret
	for i := range 50 {
		secrets = append(secrets, secret(fmt.Sprintf("uid-%02d", i), "team", fmt.Sprintf("s%02d", i), fmt.Sprintf("hash-%02d", i)))
	}
	const key = "registry.example/team/app"
	image, ref := secretMatchImage, secretMatchRef
	if err := cache.WriteImagePulledRecord(logr.Discard(), rec(ref, t0, map[string]accessor.ImagePullCredentials{
		key: {KubernetesSecrets: secrets}})); err != nil {
		b.Fatal(err)
	}
	if stamps != nil {
		if err := stamps.Stamp(secretProof(ref, key, &secrets[49])); err != nil {
			b.Fatal(err)
		}
	}
	pod := []accessor.ImagePullSecret{secrets[49]}
	get := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) { return pod, nil, nil }
	if got, _ := m.MustAttemptImagePull(ctx, image, ref, get); got {
		b.Fatal("secret not matched")
	}
	return m, get
}

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/originverify"
)

// proofShape is one image shape of BenchmarkOriginCheck.
type proofShape struct {
	layers     int
	totalBytes int64
}

func (s proofShape) String() string {
	size := fmt.Sprintf("%dMB", s.totalBytes/1_000_000)
	if s.totalBytes >= 1_000_000_000 {
		size = fmt.Sprintf("%dGB", s.totalBytes/1_000_000_000)
	}
	return fmt.Sprintf("layers=%d/size=%s", s.layers, size)
}

// BenchmarkOriginCheck measures one origin check of an image whose blobs
// the node already holds, against a real docker-registry with htpasswd:
// "head" is the check originverify made before the proof (one manifest
// HEAD through oras-go's auth client, the 401 challenge included), "proof"
// is originverify's proof of possession (the manifest fetched and hashed,
// every held blob challenged). bytes-moved/op counts the response bodies
// read from the registry; requests/op the HTTP requests sent.
func BenchmarkOriginCheck(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("the e2e benchmarks start docker-registry and must run as root")
	}
	const user, pass = "bench", "bench-secret"
	ctx := context.Background()
	reg, err := nodetest.StartRegistry(ctx, b.TempDir(), &nodetest.BasicAuth{Username: user, Password: pass})
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Stop()
	cred := &imageruntime.AuthConfig{Username: user, Password: pass}
	for _, shape := range []proofShape{
		{1, 10_000_000}, {10, 10_000_000}, {50, 10_000_000},
		{1, 1_000_000_000}, {10, 1_000_000_000}, {50, 1_000_000_000},
	} {
		b.Run(shape.String(), func(b *testing.B) {
			img, err := pushShape(ctx, b.TempDir(), reg, user, pass, shape)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("head", func(b *testing.B) { benchHead(b, reg.Host, img, user, pass) })
			b.Run("proof", func(b *testing.B) { benchProof(b, reg.Host, img, cred) })
		})
	}
}

func benchHead(b *testing.B, host string, img pushedImage, user, pass string) {
	var requests atomic.Int64
	client := &auth.Client{
		Client:     &http.Client{Transport: countingTransport{base: http.DefaultTransport, n: &requests}},
		Cache:      auth.NewCache(),
		Credential: auth.StaticCredential(host, auth.Credential{Username: user, Password: pass}),
	}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		// A fresh token cache per check, as the old Verify made one per call.
		client.Cache = auth.NewCache()
		repo, err := remote.NewRepository(host + "/" + img.repo)
		if err != nil {
			b.Fatal(err)
		}
		repo.PlainHTTP = true
		repo.Client = client
		desc, err := repo.Resolve(ctx, img.digest)
		if err != nil {
			b.Fatal(err)
		}
		if desc.Digest.String() != img.digest {
			b.Fatalf("HEAD answered %s, want %s", desc.Digest, img.digest)
		}
	}
	b.ReportMetric(0, "bytes-moved/op")
	b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
}

func benchProof(b *testing.B, host string, img pushedImage, cred *imageruntime.AuthConfig) {
	v := originverify.New(originverify.WithInsecureRegistries(host), originverify.WithContent(img.content))
	ctx := context.Background()
	var bytesMoved int64
	var requests int
	b.ResetTimer()
	for b.Loop() {
		p, err := v.Prove(ctx, host+"/"+img.repo+"@"+img.digest, cred)
		if err != nil {
			b.Fatal(err)
		}
		if p.BlobsChallenged+p.BlobsFetched != img.blobs {
			b.Fatalf("the proof covered %d challenged + %d fetched blobs, want all %d the node holds", p.BlobsChallenged, p.BlobsFetched, img.blobs)
		}
		bytesMoved += p.BytesFetched
		requests += p.Requests
	}
	b.ReportMetric(float64(bytesMoved)/float64(b.N), "bytes-moved/op")
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
}

// countingTransport counts the requests it sends.
type countingTransport struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.base.RoundTrip(req)
}

// pushedImage is an image pushed for the benchmark, with the node's copy
// of its blobs.
type pushedImage struct {
	repo, digest string
	blobs        int // config and layers
	content      *fileContent
}

// pushShape pushes an image of shape.layers layers of random bytes
// (incompressible), shape.totalBytes in all, written to files under dir
// and streamed to the registry, plus its config and an OCI manifest.
func pushShape(ctx context.Context, dir string, reg *nodetest.Registry, user, pass string, shape proofShape) (pushedImage, error) {
	repo := fmt.Sprintf("bench/shape-%d-%d", shape.layers, shape.totalBytes)
	content := &fileContent{files: map[string]string{}}
	type desc struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	}
	var layers []desc
	var diffIDs []string
	per := shape.totalBytes / int64(shape.layers)
	for i := 0; i < shape.layers; i++ {
		path := filepath.Join(dir, fmt.Sprintf("layer-%d", i))
		dgst, err := writeRandomFile(path, per)
		if err != nil {
			return pushedImage{}, err
		}
		if err := pushBlobFile(ctx, reg.Host, repo, user, pass, path, dgst, per); err != nil {
			return pushedImage{}, err
		}
		content.files[dgst] = path
		layers = append(layers, desc{"application/vnd.oci.image.layer.v1.tar", dgst, per})
		diffIDs = append(diffIDs, dgst)
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	if err != nil {
		return pushedImage{}, err
	}
	configPath := filepath.Join(dir, "config")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return pushedImage{}, err
	}
	configDigest := sha256Digest(config)
	if err := pushBlobFile(ctx, reg.Host, repo, user, pass, configPath, configDigest, int64(len(config))); err != nil {
		return pushedImage{}, err
	}
	content.files[configDigest] = configPath
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        desc{"application/vnd.oci.image.config.v1+json", configDigest, int64(len(config))},
		"layers":        layers,
	})
	if err != nil {
		return pushedImage{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+reg.Host+"/v2/"+repo+"/manifests/v1", bytes.NewReader(manifest))
	if err != nil {
		return pushedImage{}, err
	}
	req.SetBasicAuth(user, pass)
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	if err := send(req, http.StatusCreated); err != nil {
		return pushedImage{}, fmt.Errorf("pushing the manifest: %w", err)
	}
	return pushedImage{repo: repo, digest: sha256Digest(manifest), blobs: shape.layers + 1, content: content}, nil
}

// writeRandomFile writes size random bytes to path and returns their digest.
func writeRandomFile(path string, size int64) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// pushBlobFile streams the file at path to the registry in one monolithic
// upload (POST, then PUT with the digest).
func pushBlobFile(ctx context.Context, host, repo, user, pass, path, dgst string, size int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+host+"/v2/"+repo+"/blobs/uploads/", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("starting an upload: %s", resp.Status)
	}
	loc, err := resp.Location()
	if err != nil {
		return err
	}
	q := loc.Query()
	q.Set("digest", dgst)
	loc.RawQuery = q.Encode()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, loc.String(), f)
	if err != nil {
		return err
	}
	put.ContentLength = size
	put.Header.Set("Content-Type", "application/octet-stream")
	put.SetBasicAuth(user, pass)
	if err := send(put, http.StatusCreated); err != nil {
		return fmt.Errorf("uploading %s: %w", dgst, err)
	}
	return nil
}

func send(req *http.Request, want int) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fileContent is the node's copy of the pushed blobs, an
// imageruntime.Content over files.
type fileContent struct {
	mu    sync.Mutex
	files map[string]string // digest -> path
}

var _ imageruntime.Content = (*fileContent)(nil)

func (c *fileContent) Size(_ context.Context, dgst string) (int64, bool, error) {
	c.mu.Lock()
	path, ok := c.files[dgst]
	c.mu.Unlock()
	if !ok {
		return 0, false, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return 0, false, err
	}
	return info.Size(), true, nil
}

func (c *fileContent) ReadAt(_ context.Context, dgst string, p []byte, off int64) (int, error) {
	c.mu.Lock()
	path, ok := c.files[dgst]
	c.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("%s: not held", dgst)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.ReadAt(p, off)
}

package nodetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// File is one regular file of an image layer.
type File struct {
	Data []byte
	Mode os.FileMode // permission bits; 0 means 0644
}

const (
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// PushImage builds a one-layer OCI image holding files (path -> content,
// parent directories added) whose config has os linux, the host's GOARCH and
// entrypoint, and pushes it to reg as repoTag ("repo/name:tag", with or
// without the "Host/" prefix; tag "latest" when missing) through the
// registry HTTP API v2, with basic auth when auth is not nil. It returns the
// manifest digest ("sha256:..."). The image is reproducible: the same
// inputs give the same digest.
func PushImage(ctx context.Context, reg *Registry, repoTag string, files map[string]File, entrypoint []string, auth *BasicAuth) (string, error) {
	repo, tag := splitRepoTag(strings.TrimPrefix(repoTag, reg.Host+"/"))
	if repo == "" {
		return "", fmt.Errorf("bad image reference %q", repoTag)
	}
	layerTar, err := layerTar(files)
	if err != nil {
		return "", err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(layerTar)
	if err := zw.Close(); err != nil {
		return "", err
	}
	cfg := map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      "1970-01-01T00:00:00Z",
		"config": map[string]any{
			"Entrypoint": entrypoint,
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digestOf(layerTar)}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaTypeManifest,
		"config":        descriptor{mediaTypeConfig, digestOf(cfgJSON), int64(len(cfgJSON))},
		"layers":        []descriptor{{mediaTypeLayer, digestOf(gz.Bytes()), int64(gz.Len())}},
	})
	if err != nil {
		return "", err
	}
	c := &registryClient{base: reg.URL(), repo: repo, auth: auth, http: &http.Client{Timeout: 60 * time.Second}}
	for _, blob := range [][]byte{gz.Bytes(), cfgJSON} {
		if err := c.pushBlob(ctx, blob); err != nil {
			return "", err
		}
	}
	dgst := digestOf(manifest)
	resp, err := c.do(ctx, http.MethodPut, c.base+"/v2/"+repo+"/manifests/"+tag, mediaTypeManifest, manifest)
	if err != nil {
		return "", err
	}
	if err := expect(resp, http.StatusCreated, "PUT manifest "+repo+":"+tag); err != nil {
		return "", err
	}
	if got := resp.Header.Get("Docker-Content-Digest"); got != "" && got != dgst {
		return "", fmt.Errorf("registry stored manifest %s as %s, want %s", repoTag, got, dgst)
	}
	return dgst, nil
}

func splitRepoTag(ref string) (repo, tag string) {
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		return ref[:i], ref[i+1:]
	}
	return ref, "latest"
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// layerTar returns an uncompressed tar of files, sorted, with their parent
// directories, owned by root, with a fixed modification time.
func layerTar(files map[string]File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	dirs := map[string]bool{}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		clean := strings.TrimPrefix(path.Clean("/"+name), "/")
		if clean == "" {
			return nil, fmt.Errorf("bad file name %q", name)
		}
		var parents []string
		for d := path.Dir(clean); d != "." && d != "/"; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		f := files[name]
		mode := int64(f.Mode.Perm())
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: clean, Mode: mode, Size: int64(len(f.Data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type registryClient struct {
	base, repo string
	auth       *BasicAuth
	http       *http.Client
}

func (c *registryClient) do(ctx context.Context, method, u, contentType string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", contentType)
	}
	if c.auth != nil {
		req.SetBasicAuth(c.auth.Username, c.auth.Password)
	}
	return c.http.Do(req)
}

func expect(resp *http.Response, want int, what string) error {
	defer resp.Body.Close()
	if resp.StatusCode == want {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	return fmt.Errorf("%s: %s: %s", what, resp.Status, bytes.TrimSpace(msg))
}

// pushBlob uploads blob unless the registry has it already (monolithic
// upload: POST to open the session, PUT with the digest and the content).
func (c *registryClient) pushBlob(ctx context.Context, blob []byte) error {
	dgst := digestOf(blob)
	resp, err := c.do(ctx, http.MethodHead, c.base+"/v2/"+c.repo+"/blobs/"+dgst, "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	resp, err = c.do(ctx, http.MethodPost, c.base+"/v2/"+c.repo+"/blobs/uploads/", "", nil)
	if err != nil {
		return err
	}
	loc := resp.Header.Get("Location")
	if err := expect(resp, http.StatusAccepted, "POST blob upload to "+c.repo); err != nil {
		return err
	}
	lu, err := url.Parse(loc)
	if err != nil || loc == "" {
		return fmt.Errorf("blob upload to %s: bad Location %q", c.repo, loc)
	}
	base, _ := url.Parse(c.base + "/")
	lu = base.ResolveReference(lu)
	q := lu.Query()
	q.Set("digest", dgst)
	lu.RawQuery = q.Encode()
	resp, err = c.do(ctx, http.MethodPut, lu.String(), "application/octet-stream", blob)
	if err != nil {
		return err
	}
	return expect(resp, http.StatusCreated, "PUT blob "+dgst+" to "+c.repo)
}

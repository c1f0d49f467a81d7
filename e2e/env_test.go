//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
)

// Numbers of images env pushes: the scenarios use up to 3 private and 6
// public ones.
const (
	privateImageCount = 3
	publicImageCount  = 6
)

// setupTimeout bounds starting the registries and containerd and pushing
// the images.
const setupTimeout = 2 * time.Minute

// env is what one test runs against: a containerd of its own and two
// registries, one open and one behind htpasswd, holding the test images.
type env struct {
	containerd    *nodetest.Containerd
	user, pass    string
	privateImages []string // on the htpasswd registry, tenant-a/private<i>:v1
	publicImages  []string // on the open registry, public/app<i>:v1
}

// startEnv starts the test's registries and containerd, pushes the images
// and stops everything in t.Cleanup. It fails the test, with the reason,
// when this machine cannot run it (not root, a program missing).
func startEnv(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the e2e tests start containerd and must run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	began := time.Now()
	e := &env{user: "tenant-a-robot", pass: randomHex(10)}
	auth := &nodetest.BasicAuth{Username: e.user, Password: e.pass}

	privateDir, publicDir := t.TempDir(), t.TempDir()
	private, err := nodetest.StartRegistry(ctx, privateDir, auth)
	if err != nil {
		t.Fatalf("htpasswd registry: %v", err)
	}
	t.Cleanup(private.Stop)
	public, err := nodetest.StartRegistry(ctx, publicDir, nil)
	if err != nil {
		t.Fatalf("open registry: %v", err)
	}
	t.Cleanup(public.Stop)

	// Distinct content per image and per run, so that every image has a
	// digest of its own.
	run := randomHex(4)
	for i := 1; i <= privateImageCount; i++ {
		ref := fmt.Sprintf("%s/tenant-a/private%d:v1", private.Host, i)
		pushHello(t, ctx, private, ref, fmt.Sprintf("private image %d %s", i, run), auth)
		e.privateImages = append(e.privateImages, ref)
	}
	for i := 1; i <= publicImageCount; i++ {
		ref := fmt.Sprintf("%s/public/app%d:v1", public.Host, i)
		pushHello(t, ctx, public, ref, fmt.Sprintf("public image %d %s", i, run), nil)
		e.publicImages = append(e.publicImages, ref)
	}

	e.containerd, err = nodetest.StartContainerd(ctx, nodetest.ContainerdOptions{
		Name:               "e2e",
		InsecureRegistries: []string{private.Host, public.Host},
	})
	if err != nil {
		t.Fatalf("containerd: %v", err)
	}
	t.Cleanup(func() {
		t0 := time.Now()
		e.containerd.Stop()
		t.Logf("containerd stopped in %v", time.Since(t0).Round(time.Millisecond))
	})
	// Registered last, so it runs first: the logs are still there.
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range []string{e.containerd.Log(), filepath.Join(privateDir, "registry.log"), filepath.Join(publicDir, "registry.log")} {
				t.Logf("last lines of %s:\n%s", log, lastLines(log, 30))
			}
		}
	})
	t.Logf("registries, %d images and containerd ready in %v", privateImageCount+publicImageCount, time.Since(began).Round(time.Millisecond))
	return e
}

// pushHello pushes an image holding one file, /hello.txt, with content.
func pushHello(t *testing.T, ctx context.Context, reg *nodetest.Registry, ref, content string, auth *nodetest.BasicAuth) {
	t.Helper()
	files := map[string]nodetest.File{"hello.txt": {Data: []byte(content + "\n")}}
	if _, err := nodetest.PushImage(ctx, reg, ref, files, []string{"/hello.txt"}, auth); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func lastLines(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

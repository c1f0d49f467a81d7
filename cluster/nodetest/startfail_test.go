package nodetest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
)

// fakeServer satisfies nodetest.APIServer without an API server, for
// failures that happen before the kubelet would talk to one.
type fakeServer struct{}

func (fakeServer) NodeToken(node string) string { return "token-" + node }
func (fakeServer) WriteKubeconfig(path, token string) error {
	return os.WriteFile(path, []byte("apiVersion: v1\nkind: Config\n"), 0o600)
}
func (fakeServer) ConfigForToken(token string) *rest.Config {
	return &rest.Config{Host: "https://127.0.0.1:1", BearerToken: token}
}

// TestStartNodeFailsCleanly: a kubelet that exits at once makes StartNode
// fail quickly with the kubelet's log in the error, and leaves no process,
// mount or directory behind.
func TestStartNodeFailsCleanly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestStartNodeFailsCleanly starts containerd and must run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	parent := t.TempDir()
	fakeKubelet := parent + "/kubelet"
	if err := os.WriteFile(fakeKubelet, []byte("#!/bin/sh\necho fake kubelet refuses to start >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	n, err := nodetest.StartNode(ctx, nodetest.NodeOptions{
		Name:         "node-broken",
		Server:       fakeServer{},
		Kubelet:      fakeKubelet,
		SandboxImage: "127.0.0.1:1/pause:v1",
		ParentDir:    parent,
		LogDir:       parent + "/logs",
	})
	if err == nil {
		n.Stop()
		t.Fatal("StartNode with a kubelet that exits succeeded")
	}
	t.Logf("StartNode failed as expected after %v: %s", time.Since(t0).Round(time.Millisecond), strings.SplitN(err.Error(), "\n", 2)[0])
	for _, want := range []string{"kubelet exited", "fake kubelet refuses to start", "containerd.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("StartNode took %v to notice the kubelet exited", d)
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if e.Name() != "kubelet" && e.Name() != "logs" {
			t.Errorf("left behind in %s: %s", parent, e.Name())
		}
	}
	if data, err := os.ReadFile(parent + "/logs/node-broken-kubelet.log"); err != nil || !strings.Contains(string(data), "refuses") {
		t.Errorf("kubelet log in LogDir: %q, %v", data, err)
	}
	if pids := pidsWithSubstring(parent); len(pids) > 0 {
		t.Errorf("processes %v still refer to %s", pids, parent)
	}
}

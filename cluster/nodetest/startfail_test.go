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
// fail because of the exit (not its own deadline, nor the caller's), with the
// kubelet's exit status and log in the error, and leaves no process, mount or
// directory behind.
func TestStartNodeFailsCleanly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestStartNodeFailsCleanly starts containerd and must run as root")
	}
	// The caller's deadline is far past StartNode's own (containerd's socket
	// in 30 s, the kubelet's healthz in 60 s, Ready in ReadyTimeout), so
	// only the kubelet's exit can end StartNode with "kubelet exited" while
	// ctx is still live.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	parent := t.TempDir()
	fakeKubelet := parent + "/kubelet"
	if err := os.WriteFile(fakeKubelet, []byte("#!/bin/sh\necho fake kubelet refuses to start >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := nodetest.StartNode(ctx, nodetest.NodeOptions{
		Name:         "node-broken",
		Server:       fakeServer{},
		Kubelet:      fakeKubelet,
		SandboxImage: "127.0.0.1:1/pause:v1",
		ParentDir:    parent,
		LogDir:       parent + "/logs",
		ReadyTimeout: 10 * time.Minute,
	})
	if err == nil {
		n.Stop()
		t.Fatal("StartNode with a kubelet that exits succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("StartNode returned only when the caller's context ended (%v): %v", ctx.Err(), err)
	}
	for _, want := range []string{"node node-broken: kubelet exited", "exit status 3", "fake kubelet refuses to start", "containerd.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, wrong := range []string{"not ok in", "not Ready within", "waiting for kubelet healthz"} {
		if strings.Contains(err.Error(), wrong) {
			t.Errorf("StartNode ended on a deadline (%q), not on the kubelet's exit:\n%v", wrong, err)
		}
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

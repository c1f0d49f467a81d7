package nodetest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/cluster/nodetest"
)

// TestRuntimeEndpoint: the function gets containerd's endpoint once
// containerd answers, the kubelet is started with the endpoint it returns
// (flag and imageServiceEndpoint), and its error fails StartNode cleanly.
// The kubelet is a script that saves its arguments and exits.
func TestRuntimeEndpoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestRuntimeEndpoint starts containerd and must run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	parent := t.TempDir()
	argsFile := filepath.Join(parent, "kubelet.args")
	fakeKubelet := filepath.Join(parent, "kubelet")
	script := "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\" >> " + argsFile +
		"; case \"$a\" in --config=*) cat \"${a#--config=}\" >> " + argsFile + ";; esac; done\nexit 3\n"
	if err := os.WriteFile(fakeKubelet, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := func(f func(context.Context, string) (string, error)) nodetest.NodeOptions {
		return nodetest.NodeOptions{Name: "node-proxied", Server: fakeServer{}, Kubelet: fakeKubelet,
			SandboxImage: "127.0.0.1:1/pause:v1", ParentDir: parent, RuntimeEndpoint: f}
	}

	var got string
	const proxied = "unix:///run/some-proxy.sock"
	_, err := nodetest.StartNode(ctx, opts(func(_ context.Context, ep string) (string, error) {
		got = ep
		return proxied, nil
	}))
	if err == nil || !strings.Contains(err.Error(), "kubelet exited") {
		t.Fatalf("StartNode with the script kubelet = %v; want the kubelet's exit", err)
	}
	if !strings.HasPrefix(got, "unix://"+parent+"/") || !strings.HasSuffix(got, "/containerd/containerd.sock") {
		t.Errorf("RuntimeEndpoint got %q; want the node's containerd socket under %s", got, parent)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(args), "--container-runtime-endpoint="+proxied+"\n") {
		t.Errorf("kubelet args lack --container-runtime-endpoint=%s:\n%s", proxied, args)
	}
	if !strings.Contains(string(args), "imageServiceEndpoint: \""+proxied+"\"\n") {
		t.Errorf("kubelet config lacks imageServiceEndpoint %q:\n%s", proxied, args)
	}

	boom := errors.New("proxy did not start")
	_, err = nodetest.StartNode(ctx, opts(func(context.Context, string) (string, error) { return "", boom }))
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "RuntimeEndpoint") {
		t.Fatalf("StartNode with a failing RuntimeEndpoint = %v; want it wrapped", err)
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if e.Name() != "kubelet" && e.Name() != "kubelet.args" {
			t.Errorf("left behind in %s: %s", parent, e.Name())
		}
	}
	if pids := pidsWithSubstring(parent); len(pids) > 0 {
		t.Errorf("processes %v still refer to %s", pids, parent)
	}
}

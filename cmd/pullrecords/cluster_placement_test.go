package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
)

// A --prepull-toleration the controller cannot use stops the command before
// it talks to any API server, naming the flag: a typo never starts a
// controller with a placement the admin did not mean.
func TestControllerRefusesABadPrepullToleration(t *testing.T) {
	for _, bad := range []string{"dedicated", "dedicated=gpu", "dedicated:Evict", ":NoSchedule", "exists"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"controller", "--noop-image", "registry.test/pullrecords:1",
			"--kubeconfig", "/nonexistent/kubeconfig", "--prepull-toleration", "a=b:NoSchedule", "--prepull-toleration", bad}, &stdout, &stderr)
		if code != exitFailed || !strings.Contains(stderr.String(), "--prepull-toleration: toleration "+strconv.Quote(bad)) || strings.Contains(stderr.String(), "kubeconfig") {
			t.Errorf("%q: exit %d, stderr %q; want %d naming --prepull-toleration, before the kubeconfig is read", bad, code, stderr.String(), exitFailed)
		}
	}
}

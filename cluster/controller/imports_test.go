package controller

import (
	"os/exec"
	"strings"
	"testing"
)

// The controller depends on no package of this project but cluster/api:
// the node-local image cache, the pull manager and their stores are not
// part of it (ARCHITECTURE.md).
func TestImportsOnlyClusterAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const project = "github.com/pullrecords/pullrecords"
	allowed := map[string]bool{project + "/cluster/api": true, project + "/cluster/controller": true}
	var bad []string
	for _, pkg := range strings.Fields(string(out)) {
		if (pkg == project || strings.HasPrefix(pkg, project+"/")) && !allowed[pkg] {
			bad = append(bad, pkg)
		}
	}
	if len(bad) > 0 {
		t.Errorf("cluster/controller depends on %v; it may use only cluster/api of this project", bad)
	}
}

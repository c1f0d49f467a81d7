package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// createCacheYAML creates (dry run) the tenant's ImageCache from the YAML
// of its spec and returns the API server's error.
func (tn *tenant) createCacheYAML(name, specYAML string) error {
	tn.e.t.Helper()
	doc := fmt.Sprintf("apiVersion: kubefledged.io/v1alpha2\nkind: ImageCache\nmetadata:\n  name: %s\n  namespace: %s\n%s", name, tn.ns, specYAML)
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		tn.e.t.Fatalf("bad test YAML: %v\n%s", err, doc)
	}
	_, err := tn.dyn.Resource(api.ImageCacheResource).Namespace(tn.ns).Create(tn.e.ctx, &unstructured.Unstructured{Object: obj},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// The CRD refuses what kube-fledged's webhook refused (an entry without
// images, an image twice in one entry) with a clear message, and accepts
// every shape kube-fledged accepted.
func TestImageCacheValidationAsKubeFledged(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant("v")
	refused := []struct{ name, spec, want string }{
		{"empty-images", "spec:\n  cacheSpec:\n  - images: []\n", "at least one image"},
		{"empty-second", "spec:\n  cacheSpec:\n  - images: [nginx]\n  - images: []\n    nodeSelector: {tier: backend}\n", "at least one image"},
		{"duplicate", "spec:\n  cacheSpec:\n  - images: [nginx:1.23, redis, nginx:1.23]\n", `Duplicate value: "nginx:1.23"`},
		{"no-images", "spec:\n  cacheSpec:\n  - nodeSelector: {tier: backend}\n", "images: Required value"},
		{"no-cachespec", "spec:\n  imagePullSecrets: [{name: regcred}]\n", "cacheSpec: Required value"},
	}
	for _, c := range refused {
		// kubectl apply (client side) creates a new object: schema errors.
		err := tn.createCacheYAML(c.name, c.spec)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %s: got %v (%v), want Invalid with %q", c.name, err, statusCode(err), c.want)
		}
		// Server-side apply (kubectl --server-side, Flux) is refused too;
		// a duplicate in a set list fails before the schema is checked,
		// with the API server's own message.
		err = tn.applyCacheYAML(c.name, c.spec, true)
		want := c.want
		if c.name == "duplicate" {
			want = `duplicate entries for key [="nginx:1.23"]`
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("server-side apply %s: got %v (%v), want an error with %q", c.name, err, statusCode(err), want)
		}
	}
	accepted := []struct{ name, spec string }{
		// kube-fledged's sample manifest's shape.
		{"sample", "spec:\n  cacheSpec:\n  - images:\n    - ghcr.io/jitesoft/nginx:1.23.1\n    - us.gcr.io/k8s-artifacts-prod/cassandra:v7\n" +
			"  - images:\n    - docker.io/library/alpine:3.15\n    nodeSelector:\n      tier: backend\n  imagePullSecrets:\n  - name: myregistrykey\n"},
		{"same-image-two-entries", "spec:\n  cacheSpec:\n  - images: [nginx]\n  - images: [nginx]\n    nodeSelector: {tier: backend}\n"},
		{"spellings-differ", "spec:\n  cacheSpec:\n  - images: [nginx, \"nginx \", docker.io/library/nginx, nginx:latest]\n"},
		{"empty-cachespec", "spec:\n  cacheSpec: []\n"},
		{"many-images", "spec:\n  cacheSpec:\n  - images: [" + strings.Join(imageList("many", 90), ", ") + "]\n"},
	}
	for _, c := range accepted {
		if err := tn.createCacheYAML(c.name, c.spec); err != nil {
			t.Errorf("create %s, which kube-fledged accepted: %v", c.name, err)
		}
		if err := tn.applyCacheYAML(c.name, c.spec, true); err != nil {
			t.Errorf("server-side apply %s, which kube-fledged accepted: %v", c.name, err)
		}
	}
	// An object a user then edits: a duplicate added by an update is
	// refused.
	if err := tn.applyCacheYAML("editable", "spec:\n  cacheSpec:\n  - images: [a:1, b:1]\n", false); err != nil {
		t.Fatal(err)
	}
	u, err := tn.dyn.Resource(api.ImageCacheResource).Namespace(tn.ns).Get(e.ctx, "editable", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, []any{map[string]any{"images": []any{"a:1", "b:1", "a:1"}}}, "spec", "cacheSpec"); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.dyn.Resource(api.ImageCacheResource).Namespace(tn.ns).Update(e.ctx, u, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("update adding a duplicate: %v, want Invalid", err)
	}
}

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}

// An ImageCache stored before the CRD refused duplicates (kube-fledged run
// without its webhook) keeps working: the controller writes its status and
// caches each image once, and only an edit that keeps the duplicate is
// refused.
func TestAdoptedDuplicatesStillServed(t *testing.T) {
	e := newEnv(t)
	crd := repoFile("deploy", "crds", "imagecaches.kubefledged.io.yaml")
	data, err := os.ReadFile(crd)
	if err != nil {
		t.Fatal(err)
	}
	loose := strings.Replace(string(data), "x-kubernetes-list-type: set\n", "x-kubernetes-list-type: atomic\n", 1)
	if loose == string(data) {
		t.Fatal("the CRD has no set list type to take out")
	}
	old := filepath.Join(t.TempDir(), "old-crd.yaml")
	if err := os.WriteFile(old, []byte(loose), 0o600); err != nil {
		t.Fatal(err)
	}
	s := apiservertest.Need(t)
	if err := apiservertest.Apply(e.ctx, s.Admin, old); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := apiservertest.Apply(context.Background(), s.Admin, crd); err != nil {
				t.Fatalf("restoring the CRD: %v", err)
			}
		}
	}
	t.Cleanup(restore)
	tn := e.tenant("d")
	spec := "spec:\n  cacheSpec:\n  - images: [registry.test/public/dup:1, registry.test/public/other:1, registry.test/public/dup:1]\n    nodeSelector: {" + e.label + ": \"yes\"}\n"
	e.waitFor("the old CRD serves duplicates", func() bool { return tn.applyCacheYAML("legacy", spec, false) == nil })
	restore()
	e.waitFor("the CRD refuses duplicates again", func() bool {
		return tn.applyCacheYAML("probe", "spec:\n  cacheSpec:\n  - images: [x, x]\n", true) != nil
	})
	n := e.addNode("n", true)
	e.startController(controller.Config{})
	ic := tn.waitDone("legacy", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts.Desired != 2 || len(tn.results(n, ic)) != 2 {
		t.Fatalf("legacy: %+v %+v", ic.Status, ic.Status.Counts)
	}
}

package apiservertest_test

import (
	"context"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
)

// kube-fledged's documented removal deletes CRDs by its label (kubectl
// delete crd -l app=kubefledged). Applying the shipped CRD over kube-fledged's,
// created without the last-applied annotation, must take that label over, so
// the removal no longer selects the CRD that now holds every ImageCache. The
// check is the API server's own: a dry-run collection delete by that label.
func TestShippedCRDLeavesKubeFledgedRemovalSelector(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(s.Admin)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	raw, err := os.ReadFile("testdata/kubefledged-crd-created.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Create(ctx, u, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })

	if err := apiservertest.Apply(ctx, s.Admin, "../../deploy/crds/imagecaches.kubefledged.io.yaml"); err != nil {
		t.Fatal(err)
	}
	got, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := got.GetLabels()["app"]; v == "kubefledged" {
		t.Errorf("after applying the shipped CRD its labels are %v: kube-fledged's removal would delete it", got.GetLabels())
	}
	selected, err := crds.List(ctx, metav1.ListOptions{LabelSelector: "app=kubefledged"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range selected.Items {
		if c.GetName() == u.GetName() {
			t.Errorf("kubectl delete crd -l app=kubefledged selects %s", c.GetName())
		}
	}
	if err := crds.DeleteCollection(ctx, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		metav1.ListOptions{LabelSelector: "app=kubefledged"}); err != nil {
		t.Fatalf("dry-run removal: %v", err)
	}
	if _, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{}); err != nil {
		t.Errorf("after a dry-run removal the CRD is gone: %v", err)
	}
}

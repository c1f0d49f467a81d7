package apiservertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// FieldManager is the server-side apply field manager of Apply.
const FieldManager = "pullrecords-test"

// crdTimeout bounds the wait for a CRD to be Established and discovered, and
// for a kind to appear in discovery.
const crdTimeout = 30 * time.Second

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// manifest is one object of a file.
type manifest struct {
	file  string
	index int // document number in file, from 1
	obj   *unstructured.Unstructured
}

func (m manifest) String() string {
	name := m.obj.GetName()
	if ns := m.obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s document %d (%s %s %s)", m.file, m.index, m.obj.GetAPIVersion(), m.obj.GetKind(), name)
}

// Apply server-side-applies every object of the given multi-document YAML
// (or JSON) files with field manager "pullrecords-test" and force, mapping
// kinds to resources through discovery. CustomResourceDefinitions go first
// and are waited for until Established and served in discovery; then
// Namespaces; then the other objects in file order. Namespaced objects
// without a namespace go to "default"; kind List is expanded. Applying the
// same files again is a no-op. An error names the file and the object.
func Apply(ctx context.Context, cfg *rest.Config, files ...string) error {
	var crds, namespaces, others []manifest
	for _, f := range files {
		ms, err := readManifests(f)
		if err != nil {
			return err
		}
		for _, m := range ms {
			gvk := m.obj.GroupVersionKind()
			switch {
			case gvk.Group == crdGVR.Group && gvk.Kind == "CustomResourceDefinition":
				crds = append(crds, m)
			case gvk.Group == "" && gvk.Kind == "Namespace":
				namespaces = append(namespaces, m)
			default:
				others = append(others, m)
			}
		}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("apiservertest: apply: dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("apiservertest: apply: discovery client: %w", err)
	}
	for _, m := range crds {
		if _, err := dyn.Resource(crdGVR).Apply(ctx, m.obj.GetName(), m.obj, applyOptions()); err != nil {
			return fmt.Errorf("apiservertest: apply %s: %w", m, err)
		}
	}
	for _, m := range crds {
		if err := waitCRD(ctx, dyn, dc, m); err != nil {
			return err
		}
	}
	mapper, err := newMapper(dc)
	if err != nil {
		return err
	}
	for _, m := range append(namespaces, others...) {
		mapping, err := mapKind(ctx, dc, &mapper, m)
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if m.obj.GetNamespace() == "" {
				m.obj.SetNamespace("default")
			}
			ri = dyn.Resource(mapping.Resource).Namespace(m.obj.GetNamespace())
		} else if m.obj.GetNamespace() != "" {
			return fmt.Errorf("apiservertest: apply %s: %s is cluster-scoped but the object has a namespace", m, mapping.Resource)
		}
		if _, err := ri.Apply(ctx, m.obj.GetName(), m.obj, applyOptions()); err != nil {
			return fmt.Errorf("apiservertest: apply %s: %w", m, err)
		}
	}
	return nil
}

func applyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
}

func newMapper(dc discovery.DiscoveryInterface) (meta.RESTMapper, error) {
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, fmt.Errorf("apiservertest: apply: discovery: %w", err)
	}
	return restmapper.NewDiscoveryRESTMapper(groups), nil
}

// mapKind maps m's kind to a resource, re-reading discovery for a while if
// the kind is not (yet) known.
func mapKind(ctx context.Context, dc discovery.DiscoveryInterface, mapper *meta.RESTMapper, m manifest) (*meta.RESTMapping, error) {
	gvk := m.obj.GroupVersionKind()
	var mapping *meta.RESTMapping
	var mapErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, crdTimeout, true, func(context.Context) (bool, error) {
		mapping, mapErr = (*mapper).RESTMapping(gvk.GroupKind(), gvk.Version)
		if mapErr == nil {
			return true, nil
		}
		if !meta.IsNoMatchError(mapErr) {
			return false, mapErr
		}
		fresh, err := newMapper(dc)
		if err != nil {
			return false, err
		}
		*mapper = fresh
		return false, nil
	})
	if err != nil {
		if mapErr != nil {
			err = mapErr
		}
		return nil, fmt.Errorf("apiservertest: apply %s: no resource for the kind: %w", m, err)
	}
	return mapping, nil
}

// waitCRD waits until the CRD is Established and each served version's
// plural appears in discovery.
func waitCRD(ctx context.Context, dyn dynamic.Interface, dc discovery.DiscoveryInterface, m manifest) error {
	name := m.obj.GetName()
	group, _, _ := unstructured.NestedString(m.obj.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(m.obj.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(m.obj.Object, "spec", "versions")
	var served []string
	for _, v := range versions {
		vm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if s, _ := vm["served"].(bool); s {
			if n, _ := vm["name"].(string); n != "" {
				served = append(served, n)
			}
		}
	}
	var state string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, crdTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			state = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == "Established" && cm["status"] == "True" {
				established = true
			}
		}
		if !established {
			state = fmt.Sprintf("not Established; conditions %v", conds)
			return false, nil
		}
		for _, v := range served {
			list, err := dc.ServerResourcesForGroupVersion(group + "/" + v)
			if err != nil {
				state = fmt.Sprintf("Established, discovery of %s/%s: %v", group, v, err)
				return false, nil
			}
			found := false
			for _, r := range list.APIResources {
				if r.Name == plural {
					found = true
				}
			}
			if !found {
				state = fmt.Sprintf("Established, %s not yet in discovery of %s/%s", plural, group, v)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("apiservertest: apply %s: waiting for the CRD: %w (%s)", m, err, state)
	}
	return nil
}

// readManifests reads the objects of a multi-document YAML or JSON file,
// skipping empty documents and expanding kind List.
func readManifests(file string) ([]manifest, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("apiservertest: apply: %w", err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []manifest
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("apiservertest: apply: %s document %d: %w", file, i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("apiservertest: apply: %s document %d: %w", file, i, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("apiservertest: apply: %s document %d: %w", file, i, err)
		}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("apiservertest: apply: %s document %d: %w", file, i, err)
			}
			for j := range list.Items {
				out = append(out, manifest{file: file, index: i, obj: &list.Items[j]})
			}
			continue
		}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("apiservertest: apply: %s document %d (%s %s): no metadata.name", file, i, obj.GetAPIVersion(), obj.GetKind())
		}
		out = append(out, manifest{file: file, index: i, obj: obj})
	}
}

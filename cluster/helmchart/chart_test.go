package helmchart_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
)

func TestMain(m *testing.M) {
	os.Exit(apiservertest.Main(m, apiservertest.Options{}))
}

// keepPolicy is the annotation the chart adds to each CRD, and the only
// difference from deploy/crds.
const keepPolicy = "helm.sh/resource-policy"

// objects decodes multi-document YAML into objects keyed by
// "apiVersion kind namespace/name"; what is a duplicate key fails the test.
func objects(t *testing.T, what string, data []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s document %d: %v", what, i, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s document %d: %v", what, i, err)
		}
		if obj == nil {
			continue // comments only
		}
		meta, _ := obj["metadata"].(map[string]any)
		ns, _ := meta["namespace"].(string)
		name, _ := meta["name"].(string)
		key := obj["apiVersion"].(string) + " " + obj["kind"].(string) + " " + ns + "/" + name
		if _, dup := out[key]; dup {
			t.Fatalf("%s: %s twice", what, key)
		}
		out[key] = obj
	}
}

// deployObjects are the objects of deploy/crds/*.yaml and
// deploy/cluster/*.yaml.
func deployObjects(t *testing.T) map[string]map[string]any {
	t.Helper()
	var all []byte
	for _, dir := range []string{"crds", "cluster"} {
		files, err := filepath.Glob(repoFile("deploy", dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("deploy/%s: %v (%d files)", dir, err, len(files))
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(append(all, "\n---\n"...), b...)
		}
	}
	return objects(t, "deploy/", all)
}

// With default values the chart renders exactly deploy/'s objects; the CRDs
// carry Helm's keep policy besides.
func TestDefaultsRenderDeploy(t *testing.T) {
	got := objects(t, "helm template", render(t))
	want := deployObjects(t)
	for key, obj := range got {
		if obj["kind"] != "CustomResourceDefinition" {
			continue
		}
		meta := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		if ann[keepPolicy] != "keep" {
			t.Errorf("%s: annotation %s = %v, want keep (helm uninstall must not delete the CRD and every ImageCache)", key, keepPolicy, ann[keepPolicy])
		}
		delete(ann, keepPolicy)
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("helm template with defaults differs from deploy/ (-deploy +chart):\n%s", diff)
	}
	if len(want) == 0 {
		t.Error("deploy/ holds no objects")
	}
}

func daemonSet(t *testing.T, data []byte) *appsv1.DaemonSet {
	t.Helper()
	obj, ok := objects(t, "helm template", data)["apps/v1 DaemonSet pullrecords-system/pullrecords-agent"]
	if !ok {
		t.Fatal("no agent DaemonSet rendered")
	}
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &ds); err != nil {
		t.Fatal(err)
	}
	return &ds
}

// agentPaths is what the DaemonSet gives the agent: its endpoint flag, the
// socket's mount path and host path, the image store's host path, and
// whether every host path is mounted read-only.
type agentPaths struct {
	Endpoint, SocketMount, SocketHost, ImageFsHost string
	ReadOnly                                       bool
}

func pathsOf(ds *appsv1.DaemonSet) agentPaths {
	var p agentPaths
	c := ds.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--runtime-endpoint="); ok {
			p.Endpoint = v
		}
	}
	p.ReadOnly = true
	for _, m := range c.VolumeMounts {
		p.ReadOnly = p.ReadOnly && m.ReadOnly
		if m.Name == "runtime-socket" {
			p.SocketMount = m.MountPath
		}
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		switch v.Name {
		case "runtime-socket":
			p.SocketHost = v.HostPath.Path
		case "imagefs":
			p.ImageFsHost = v.HostPath.Path
		}
	}
	return p
}

// The runtime presets and overrides set the agent's socket and image store
// paths together; an unknown runtime or a relative path fails the render.
func TestAgentRuntimePaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want agentPaths
	}{
		{"containerd (default)", nil, agentPaths{"unix:///run/containerd/containerd.sock",
			"/run/containerd/containerd.sock", "/run/containerd/containerd.sock", "/var/lib/containerd", true}},
		{"crio", []string{"agent.runtime=crio"}, agentPaths{"unix:///var/run/crio/crio.sock",
			"/var/run/crio/crio.sock", "/var/run/crio/crio.sock", "/var/lib/containers/storage", true}},
		{"overrides", []string{"agent.runtime=crio", "agent.socket=/run/custom/cri.sock", "agent.imageFs=/data/images"},
			agentPaths{"unix:///run/custom/cri.sock", "/run/custom/cri.sock", "/run/custom/cri.sock", "/data/images", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, pathsOf(daemonSet(t, render(t, tc.set...)))); diff != "" {
				t.Errorf("agent paths (-want +got):\n%s", diff)
			}
		})
	}
	for _, set := range []string{"agent.runtime=docker", "agent.socket=run/x.sock", "agent.imageFs=var/lib/x"} {
		args := []string{"template", "pullrecords", repoFile("deploy", "helm", "pullrecords"), "--kube-version", kubeVersion, "--set", set}
		if _, err := renderErr(t, args...); err == nil {
			t.Errorf("--set %s rendered; want a failure", set)
		}
	}
}

// Another namespace moves every object and every service-account name the
// admission policies match on: a policy naming the old namespace would
// match nobody, and an agent could write any node's NodeImages (and so
// claim images present there). A name that is not a namespace name (one
// that could break out of the policies' CEL strings) fails the render.
func TestNamespaceMovesPolicies(t *testing.T) {
	out := render(t, "namespace.name=images-ops")
	if bytes.Contains(out, []byte("pullrecords-system")) {
		t.Errorf("namespace.name=images-ops still renders pullrecords-system:\n%s", out)
	}
	objs := objects(t, "helm template", out)
	for _, sa := range []string{"pullrecords-controller", "pullrecords-agent"} {
		if _, ok := objs["v1 ServiceAccount images-ops/"+sa]; !ok {
			t.Errorf("no ServiceAccount images-ops/%s", sa)
		}
	}
	users := policyUsers(objs)
	var want []string
	for _, u := range policyUsers(deployObjects(t)) {
		want = append(want, strings.Replace(u, ":pullrecords-system:", ":images-ops:", 1))
	}
	if len(want) == 0 {
		t.Error("deploy/'s admission policies name no service account")
	}
	if diff := cmp.Diff(want, users); diff != "" {
		t.Errorf("service accounts the admission policies name (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"a'b", "Upper", "x || true"} {
		args := []string{"template", "pullrecords", repoFile("deploy", "helm", "pullrecords"), "--kube-version", kubeVersion, "--set", "namespace.name=" + bad}
		if _, err := renderErr(t, args...); err == nil {
			t.Errorf("namespace.name=%q rendered; want a failure", bad)
		}
	}
}

// What the chart renders, with defaults and with the CRI-O preset, applies
// to a real kube-apiserver (CRDs Established, every object accepted), and
// applying it again changes nothing.
func TestRenderedChartApplies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := apiservertest.Need(t)
	dir := t.TempDir()
	defaults := filepath.Join(dir, "defaults.yaml")
	crio := filepath.Join(dir, "crio.yaml")
	if err := os.WriteFile(defaults, render(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crio, render(t, "agent.runtime=crio"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := apiservertest.Apply(ctx, s.Admin, defaults); err != nil {
		t.Fatalf("applying the default rendering: %v", err)
	}
	kube := kubernetes.NewForConfigOrDie(s.Admin)
	dep, err := kube.AppsV1().Deployments("pullrecords-system").Get(ctx, "pullrecords-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("controller container as stored: probes %+v %+v, ports %+v", c.LivenessProbe, c.ReadinessProbe, c.Ports)
	}
	rv := dep.ResourceVersion
	if err := apiservertest.Apply(ctx, s.Admin, defaults); err != nil {
		t.Fatalf("applying the default rendering again: %v", err)
	}
	if dep, err = kube.AppsV1().Deployments("pullrecords-system").Get(ctx, "pullrecords-controller", metav1.GetOptions{}); err != nil || dep.ResourceVersion != rv {
		t.Errorf("applying again changed the Deployment (resourceVersion %s -> %s, %v)", rv, dep.ResourceVersion, err)
	}
	if err := apiservertest.Apply(ctx, s.Admin, crio); err != nil {
		t.Fatalf("applying the CRI-O rendering: %v", err)
	}
	ds, err := kube.AppsV1().DaemonSets("pullrecords-system").Get(ctx, "pullrecords-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pathsOf(ds); got.SocketHost != "/var/run/crio/crio.sock" || got.ImageFsHost != "/var/lib/containers/storage" || !got.ReadOnly {
		t.Errorf("agent DaemonSet as stored after the CRI-O apply: %+v", got)
	}
}

// policyUsers lists, sorted, the service-account user names the admission
// policies among objs name.
func policyUsers(objs map[string]map[string]any) []string {
	var users []string
	for key, obj := range objs {
		if !strings.Contains(key, "ValidatingAdmissionPolicy ") {
			continue
		}
		b, _ := yaml.Marshal(obj)
		for _, line := range strings.Split(string(b), "\n") {
			if i := strings.Index(line, "system:serviceaccount:"); i >= 0 {
				users = append(users, strings.SplitN(line[i:], "'", 2)[0])
			}
		}
	}
	slices.Sort(users)
	return users
}

package apiservertest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
)

const nodeName = "node-a"

func TestMain(m *testing.M) {
	code := apiservertest.Main(m, apiservertest.Options{NodeNames: []string{nodeName, "node-b"}, AuditLog: true})
	// Main has stopped the server: check that both processes are gone, Dir
	// is removed and a second Stop is a no-op.
	if s := apiservertest.Current(); s != nil {
		if err := checkStopped(s); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: after Main:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// checkStopped verifies that s's processes are dead, s.Dir is gone and Stop
// is idempotent.
func checkStopped(s *apiservertest.Server) error {
	pids := s.PIDs()
	if len(pids) != 2 {
		return fmt.Errorf("PIDs() = %v, want apiserver and etcd", pids)
	}
	for _, pid := range pids {
		if alive(pid) {
			return fmt.Errorf("pid %d still alive after Stop", pid)
		}
	}
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("Dir %s not removed: %v", s.Dir, err)
	}
	if err := s.Stop(); err != nil {
		return fmt.Errorf("second Stop: %w", err)
	}
	return nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces, so cut after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

func server(t *testing.T) *apiservertest.Server {
	t.Helper()
	return apiservertest.Need(t)
}

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func whoami(t *testing.T, cfg *rest.Config) authenticationv1.UserInfo {
	t.Helper()
	r, err := clientset(t, cfg).AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return r.Status.UserInfo
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestServerBasics(t *testing.T) {
	s := server(t)
	if !strings.HasPrefix(s.URL, "https://127.0.0.1:") {
		t.Errorf("URL = %q", s.URL)
	}
	if len(s.CAData) == 0 || s.AdminToken == "" {
		t.Errorf("CAData %d bytes, AdminToken %q", len(s.CAData), s.AdminToken)
	}
	if s.Admin.QPS != 1000 || s.Admin.Burst != 2000 {
		t.Errorf("Admin QPS/Burst = %v/%v", s.Admin.QPS, s.Admin.Burst)
	}
	cs := clientset(t, s.Admin)
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version %s, want v1.37.2", v.GitVersion)
	}
	u := whoami(t, s.Admin)
	if u.Username != "admin" || !contains(u.Groups, "system:masters") {
		t.Errorf("admin is %+v", u)
	}
}

func TestAdminCreatesNamespace(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	cs := clientset(t, s.Admin)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "admin-ns"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Namespaces().Get(ctx, "admin-ns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.NamespaceActive {
		t.Errorf("namespace phase %q", got.Status.Phase)
	}
}

func TestNodeToken(t *testing.T) {
	s := server(t)
	if s.NodeToken("no-such-node") != "" {
		t.Error("token for an unknown node")
	}
	if s.NodeToken(nodeName) == s.NodeToken("node-b") {
		t.Error("two nodes share a token")
	}
	u := whoami(t, s.ConfigForToken(s.NodeToken(nodeName)))
	if u.Username != "system:node:"+nodeName || !contains(u.Groups, "system:nodes") {
		t.Errorf("node token authenticates as %+v", u)
	}
	// The Node authorizer lets a node register itself; NodeRestriction
	// keeps it from creating another node.
	cs := clientset(t, s.ConfigForToken(s.NodeToken(nodeName)))
	ctx := context.Background()
	self := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, self, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node creates its own Node: %v", err)
	}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node creates another Node: err = %v, want Forbidden", err)
	}
}

func TestWriteKubeconfig(t *testing.T) {
	s := server(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := s.WriteKubeconfig(path, s.NodeToken(nodeName)); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if u := whoami(t, cfg); u.Username != "system:node:"+nodeName {
		t.Errorf("kubeconfig authenticates as %+v", u)
	}
}

const crdYAML = `# a CRD and an object of it, in one file
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.pullrecords.io
spec:
  group: test.pullrecords.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
`

const objectsYAML = `apiVersion: test.pullrecords.io/v1
kind: Widget
metadata:
  name: w1
  namespace: widgets
spec:
  size: 3
---
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm1
data: {a: b}
---
apiVersion: v1
kind: Namespace
metadata:
  name: widgets
`

func TestApply(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	dir := t.TempDir()
	// The Widget comes before its CRD and its namespace in the file order.
	objects := filepath.Join(dir, "objects.yaml")
	crd := filepath.Join(dir, "crd.yaml")
	if err := os.WriteFile(objects, []byte(objectsYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crd, []byte(crdYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "test.pullrecords.io", Version: "v1", Resource: "widgets"}
	dyn, err := dynamic.NewForConfig(s.Admin)
	if err != nil {
		t.Fatal(err)
	}
	var rvs []string
	for i := range 2 {
		if err := apiservertest.Apply(ctx, s.Admin, objects, crd); err != nil {
			t.Fatalf("Apply #%d: %v", i+1, err)
		}
		w, err := dyn.Resource(gvr).Namespace("widgets").Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("after Apply #%d: %v", i+1, err)
		}
		size, _, _ := unstructuredInt(w.Object, "spec", "size")
		if size != 3 {
			t.Errorf("widget spec.size = %d", size)
		}
		mf := w.GetManagedFields()
		if len(mf) != 1 || mf[0].Manager != apiservertest.FieldManager || mf[0].Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("managed fields %+v", mf)
		}
		rvs = append(rvs, w.GetResourceVersion())
	}
	if rvs[0] != rvs[1] {
		t.Errorf("second Apply changed the object: resourceVersion %s -> %s", rvs[0], rvs[1])
	}
	cm, err := clientset(t, s.Admin).CoreV1().ConfigMaps("default").Get(ctx, "cm1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap without namespace: %v", err)
	}
	if cm.Data["a"] != "b" {
		t.Errorf("ConfigMap data %v", cm.Data)
	}
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[f]
	}
	n, ok := cur.(int64)
	return n, ok, nil
}

func TestApplyErrorNamesFileAndObject(t *testing.T) {
	s := server(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: nowhere.example/v1\nkind: Gadget\nmetadata: {name: g1}\n"
	if err := os.WriteFile(bad, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := apiservertest.Apply(ctx, s.Admin, bad)
	if err == nil {
		t.Fatal("Apply of an unknown kind succeeded")
	}
	for _, want := range []string{bad, "document 2", "Gadget", "g1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestServiceAccountBoundToPod(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	const ns = "sa-bound"
	// ServiceAccountConfig creates the namespace; the pod needs it first here.
	if _, err := s.ServiceAccountConfig(ctx, ns, "runner", ""); err != nil {
		t.Fatal(err)
	}
	cs := clientset(t, s.Admin)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p1"},
		Spec: corev1.PodSpec{
			NodeName:           nodeName,
			ServiceAccountName: "runner",
			Containers:         []corev1.Container{{Name: "c", Image: "example.invalid/x:1"}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := s.ServiceAccountConfig(ctx, ns, "runner", "p1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 1000 || cfg.Burst != 2000 {
		t.Errorf("QPS/Burst = %v/%v", cfg.QPS, cfg.Burst)
	}
	u := whoami(t, cfg)
	if u.Username != "system:serviceaccount:"+ns+":runner" {
		t.Errorf("username %q", u.Username)
	}
	if got := u.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != nodeName {
		t.Errorf("extra node-name = %v, want [%s]; extra %v", got, nodeName, u.Extra)
	}
	if got := u.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != "p1" {
		t.Errorf("extra pod-name = %v", got)
	}
	// A pod without a node cannot carry the claim.
	unscheduled := pod.DeepCopy()
	unscheduled.Name, unscheduled.Spec.NodeName = "p2", ""
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, unscheduled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ServiceAccountConfig(ctx, ns, "runner", "p2"); err == nil || !strings.Contains(err.Error(), "nodeName") {
		t.Errorf("token bound to an unscheduled pod: err = %v", err)
	}
}

func TestServiceAccountWithoutRBACIsForbidden(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	cfg, err := s.ServiceAccountConfig(ctx, "sa-plain", "nobody", "")
	if err != nil {
		t.Fatal(err)
	}
	if u := whoami(t, cfg); u.Username != "system:serviceaccount:sa-plain:nobody" || len(u.Extra["authentication.kubernetes.io/node-name"]) != 0 {
		t.Errorf("unbound token user %+v", u)
	}
	// Calling it again reuses the namespace and service account.
	if _, err := s.ServiceAccountConfig(ctx, "sa-plain", "nobody", ""); err != nil {
		t.Fatalf("second ServiceAccountConfig: %v", err)
	}
	cs := clientset(t, cfg)
	if _, err := cs.CoreV1().ConfigMaps("sa-plain").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list configmaps: err = %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create namespace: err = %v, want Forbidden", err)
	}
}

// TestStartFailure starts a second pair whose apiserver rejects its flags:
// Start must fail with the apiserver's log tail and leave nothing running.
func TestStartFailure(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	t.Setenv("PULLRECORDS_TEST_PIDFILE", pidFile)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs bytes.Buffer
	s, err := apiservertest.Start(ctx, apiservertest.Options{ExtraAPIServerFlags: []string{"--no-such-flag=1"}, LogWriter: &logs})
	if err == nil {
		s.Stop()
		t.Fatal("Start with a bad flag succeeded")
	}
	for _, want := range []string{"kube-apiserver", "no-such-flag", "last lines"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if !strings.Contains(logs.String(), "no-such-flag") {
		t.Errorf("LogWriter did not get the apiserver's output:\n%s", logs.String())
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != 2 {
		t.Fatalf("pid file %q, want etcd and kube-apiserver", b)
	}
	for _, l := range lines {
		pid, err := strconv.Atoi(l)
		if err != nil {
			t.Fatal(err)
		}
		if alive(pid) {
			t.Errorf("pid %d alive after a failed Start", pid)
		}
	}
}

func TestBinDirFromEnv(t *testing.T) {
	dir, err := apiservertest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kube-apiserver", "etcd", "kubelet"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	empty := t.TempDir()
	t.Setenv("PULLRECORDS_K8S_BIN", empty)
	if _, err := apiservertest.BinDir(); err == nil || !strings.Contains(err.Error(), empty) || !strings.Contains(err.Error(), "PULLRECORDS_K8S_BIN") {
		t.Errorf("BinDir with an empty directory: err = %v", err)
	}
}

// Without PULLRECORDS_K8S_BIN and without a build in the cache, BinDir
// builds nothing: it fails at once with the command that builds the
// programs.
func TestBinDirDoesNotBuild(t *testing.T) {
	t.Setenv("PULLRECORDS_K8S_BIN", "")
	cache := t.TempDir()
	t.Setenv("PULLRECORDS_K8S_CACHE", cache)
	_, err := apiservertest.BinDir()
	if err == nil || !strings.Contains(err.Error(), "bash scripts/k8s-binaries.sh") {
		t.Errorf("BinDir with an empty cache: err = %v, want the build command", err)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 0 {
		t.Errorf("BinDir wrote into the cache: %v", entries)
	}
}

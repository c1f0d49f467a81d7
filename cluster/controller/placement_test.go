package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// readyNode is a worker node whose kubelet reports Ready, changed by edit.
func readyNode(edit func(*corev1.Node)) *corev1.Node {
	n := node("n", map[string]string{"kubernetes.io/hostname": "n"})
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if edit != nil {
		edit(n)
	}
	return n
}

func withTaint(key, value string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func withReady(s corev1.ConditionStatus) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Status.Conditions[0].Status = s }
}

func TestPlacementDefaultsKeepPodsOffNodesTheyMayNotUse(t *testing.T) {
	cases := []struct {
		name string
		edit func(*corev1.Node)
		want string
	}{
		{"ready worker", nil, ""},
		{"cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }, "cordoned"},
		{"control-plane", func(n *corev1.Node) { n.Labels[controlPlaneLabel] = "" }, "control-plane"},
		{"legacy master", func(n *corev1.Node) { n.Labels[legacyMasterLabel] = "true" }, "control-plane"},
		{"Ready Unknown (kubelet gone)", withReady(corev1.ConditionUnknown), "not Ready"},
		{"Ready False", withReady(corev1.ConditionFalse), "not Ready"},
		{"no Ready condition", func(n *corev1.Node) { n.Status.Conditions = nil }, "not Ready"},
		{"other conditions only", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue}}
		}, "not Ready"},
		{"NoExecute taint", withTaint("dedicated", "gpu", corev1.TaintEffectNoExecute), "taint dedicated=gpu:NoExecute not tolerated"},
		{"NoSchedule taint", withTaint("dedicated", "", corev1.TaintEffectNoSchedule), "taint dedicated:NoSchedule not tolerated"},
		{"PreferNoSchedule ignored", withTaint("soft", "x", corev1.TaintEffectPreferNoSchedule), ""},
		{"control-plane taint without label", withTaint(controlPlaneLabel, "", corev1.TaintEffectNoSchedule),
			"taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated"},
		// The controller-manager's mirrors of the Ready and cordon rules:
		// the rules decide (a new Node keeps not-ready until the
		// controller-manager sees it Ready).
		{"Ready with a lagging not-ready taint", withTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule), ""},
		{"uncordoned with a lagging unschedulable taint", withTaint(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule), ""},
		{"not Ready with its taints", func(n *corev1.Node) {
			withReady(corev1.ConditionUnknown)(n)
			withTaint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoExecute)(n)
		}, "not Ready"},
		{"memory pressure taint", withTaint(corev1.TaintNodeMemoryPressure, "", corev1.TaintEffectNoSchedule),
			"taint node.kubernetes.io/memory-pressure:NoSchedule not tolerated"},
	}
	for _, tc := range cases {
		if got := (Placement{}).ineligible(readyNode(tc.edit)); got != tc.want {
			t.Errorf("%s: ineligible = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := (Placement{}).podTolerations(); len(got) != 0 {
		t.Errorf("default pod tolerations %+v, want none", got)
	}
}

func TestPlacementTolerationsAllowOnlyTheTaintsTheyMatch(t *testing.T) {
	gpu := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoExecute}
	p := Placement{Tolerations: []corev1.Toleration{gpu}}
	cases := []struct {
		name string
		edit func(*corev1.Node)
		want string
	}{
		{"tolerated", withTaint("dedicated", "gpu", corev1.TaintEffectNoExecute), ""},
		{"other value", withTaint("dedicated", "db", corev1.TaintEffectNoExecute), "taint dedicated=db:NoExecute not tolerated"},
		{"other effect", withTaint("dedicated", "gpu", corev1.TaintEffectNoSchedule), "taint dedicated=gpu:NoSchedule not tolerated"},
		{"one of two tolerated", func(n *corev1.Node) {
			withTaint("dedicated", "gpu", corev1.TaintEffectNoExecute)(n)
			withTaint("team", "a", corev1.TaintEffectNoSchedule)(n)
		}, "taint team=a:NoSchedule not tolerated"},
		// A toleration does not open what the other rules close.
		{"tolerated but cordoned", func(n *corev1.Node) {
			withTaint("dedicated", "gpu", corev1.TaintEffectNoExecute)(n)
			n.Spec.Unschedulable = true
		}, "cordoned"},
		{"tolerated but not Ready", func(n *corev1.Node) {
			withTaint("dedicated", "gpu", corev1.TaintEffectNoExecute)(n)
			withReady(corev1.ConditionUnknown)(n)
		}, "not Ready"},
	}
	for _, tc := range cases {
		if got := p.ineligible(readyNode(tc.edit)); got != tc.want {
			t.Errorf("%s: ineligible = %q, want %q", tc.name, got, tc.want)
		}
	}
	if diff := cmp.Diff([]corev1.Toleration{gpu}, p.podTolerations()); diff != "" {
		t.Errorf("pod tolerations are not exactly the admin's (-want +got):\n%s", diff)
	}
	// Comparison operators are refused by validate; ineligible does not
	// take them as tolerating either.
	lt := Placement{Tolerations: []corev1.Toleration{{Key: "size", Operator: corev1.TolerationOpLt, Value: "9", Effect: corev1.TaintEffectNoSchedule}}}
	if got := lt.ineligible(readyNode(withTaint("size", "1", corev1.TaintEffectNoSchedule))); got == "" {
		t.Error("an Lt toleration let a pod onto a tainted node")
	}
	if err := lt.validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("validate(Lt) = %v, want ErrInvalidConfig", err)
	}
}

func TestPlacementIncludesWidenOnlyTheirOwnRule(t *testing.T) {
	controlPlane := func(n *corev1.Node) {
		n.Labels[controlPlaneLabel] = ""
		withTaint(controlPlaneLabel, "", corev1.TaintEffectNoSchedule)(n)
	}
	cordoned := func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		withTaint(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule)(n)
	}
	dead := func(n *corev1.Node) {
		withReady(corev1.ConditionUnknown)(n)
		withTaint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoSchedule)(n)
		withTaint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoExecute)(n)
	}
	cases := []struct {
		name string
		p    Placement
		edit func(*corev1.Node)
		want string
	}{
		{"control-plane allowed", Placement{IncludeControlPlane: true}, controlPlane, ""},
		{"control-plane allowed, cordoned not", Placement{IncludeControlPlane: true}, cordoned, "cordoned"},
		{"cordoned allowed", Placement{IncludeCordoned: true}, cordoned, ""},
		{"cordoned allowed, control-plane not", Placement{IncludeCordoned: true}, controlPlane, "control-plane"},
		{"not Ready allowed", Placement{IncludeNotReady: true}, dead, ""},
		{"not Ready allowed, other taints not", Placement{IncludeNotReady: true}, func(n *corev1.Node) {
			dead(n)
			withTaint("dedicated", "gpu", corev1.TaintEffectNoExecute)(n)
		}, "taint dedicated=gpu:NoExecute not tolerated"},
		{"cordoned allowed, not Ready not", Placement{IncludeCordoned: true}, dead, "not Ready"},
	}
	for _, tc := range cases {
		if got := tc.p.ineligible(readyNode(tc.edit)); got != tc.want {
			t.Errorf("%s: ineligible = %q, want %q", tc.name, got, tc.want)
		}
	}
	got := Placement{IncludeCordoned: true}.podTolerations()
	want := []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("IncludeCordoned pod tolerations (-want +got):\n%s", diff)
	}
}

func TestParseToleration(t *testing.T) {
	good := map[string]corev1.Toleration{
		"dedicated=gpu:NoExecute":     {Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoExecute},
		"example.com/pool:NoSchedule": {Key: "example.com/pool", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		"Exists":                      {Operator: corev1.TolerationOpExists},
		" a=b:PreferNoSchedule ":      {Key: "a", Operator: corev1.TolerationOpEqual, Value: "b", Effect: corev1.TaintEffectPreferNoSchedule},
	}
	for in, want := range good {
		got, err := ParseToleration(in)
		if err != nil || got != want {
			t.Errorf("ParseToleration(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "dedicated", "dedicated=gpu", "dedicated:", "dedicated:Evict", "=gpu:NoSchedule", ":NoSchedule",
		"bad key!:NoSchedule", "k=bad value:NoSchedule", "exists"} {
		if got, err := ParseToleration(in); err == nil {
			t.Errorf("ParseToleration(%q) = %+v, want an error", in, got)
		}
	}
}

func TestConfigRefusesAnInvalidPlacementToleration(t *testing.T) {
	cfg := Config{Placement: Placement{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Value: "x"}}}}
	cfg.Kube, cfg.Dynamic, cfg.NoopImage = kubefake.NewClientset(), dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), "noop:1"
	if err := cfg.setDefaults(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "placement toleration") {
		t.Errorf("setDefaults = %v, want ErrInvalidConfig naming the placement toleration", err)
	}
}

func TestPrepullPodCarriesOnlyThePlacementTolerations(t *testing.T) {
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u"}}
	c := &Controller{cfg: Config{NoopImage: "noop:1"}}
	if got := c.prepullPod(ic, "n", []string{"a:1"}).Spec.Tolerations; len(got) != 0 {
		t.Errorf("default pre-pull pod tolerations %+v, want none (it would land on every tainted node)", got)
	}
	gpu := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoExecute,
		TolerationSeconds: ptr.To[int64](60)}
	c.cfg.Placement.Tolerations = []corev1.Toleration{gpu}
	if diff := cmp.Diff([]corev1.Toleration{gpu}, c.prepullPod(ic, "n", []string{"a:1"}).Spec.Tolerations); diff != "" {
		t.Errorf("pre-pull pod tolerations (-want +got):\n%s", diff)
	}
}

func TestWithSkippedCountsAndNamesTheNodes(t *testing.T) {
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	ic.Status.Reason = api.ReasonImageCacheCreate
	var skipped skips
	for _, p := range [][2]string{{"n3", "not Ready"}, {"n3", "not Ready"}, {"n2", "cordoned"}, {"n2", "cordoned"}} {
		skipped.add(p[0], p[1])
	}
	// n1's two images are pulled; n2's and n3's are skipped.
	pulled := newTally(10)
	pulled.add("n1", "a:1", api.Outcome{Status: api.WorkSucceeded})
	st := withSkipped(pulled.status(ic, 2, 1, 0), skipped)
	wantMsg := "2 node(s) skipped by the controller's placement rules: n2 cordoned, n3 not Ready."
	// Still in progress elsewhere: Processing, and the skip is said already.
	if st.Status != api.ActionStatusProcessing || !strings.Contains(st.Message, wantMsg) {
		t.Errorf("in progress: %s %q", st.Status, st.Message)
	}
	pulled.add("n1", "b:1", api.Outcome{Status: api.WorkSucceeded})
	st = withSkipped(pulled.status(ic, 2, 0, 0), skipped)
	if st.Status != api.ActionStatusSucceeded || !strings.Contains(st.Message, wantMsg) || strings.Contains(st.Message, "every selected node;") {
		t.Errorf("status %s %q, want Succeeded naming the skipped nodes", st.Status, st.Message)
	}
	if c := st.Counts; c.Desired != 6 || c.Skipped != 4 || c.Succeeded != 2 || c.Failed != 0 {
		t.Errorf("counts %+v, want desired 6, skipped 4, succeeded 2, failed 0", c)
	}

	// Every pair skipped: nothing was pulled, and the status says why.
	var one skips
	one.add("n3", "not Ready")
	st = withSkipped(newTally(10).status(ic, 0, 0, 0), one)
	if st.Status != api.ActionStatusNoImagesPulledOrDeleted || st.Message != "No image was pulled: 1 node(s) skipped by the controller's placement rules: n3 not Ready." {
		t.Errorf("all skipped: %s %q", st.Status, st.Message)
	}
	if st.Counts.Desired != 1 || st.Counts.Skipped != 1 {
		t.Errorf("all skipped: counts %+v", st.Counts)
	}

	// Many nodes: the message names at most maxSkippedNamed.
	var many skips
	for i := 0; i < maxSkippedNamed+3; i++ {
		many.add(string(rune('a'+i))+"-node", "cordoned")
	}
	if s := many.summary(); !strings.HasSuffix(s, "and 3 more.") || strings.Count(s, "cordoned") != maxSkippedNamed {
		t.Errorf("summary of %d nodes: %q", len(many.why), s)
	}
}

func TestNodeMattersForPlacementChanges(t *testing.T) {
	base := readyNode(nil)
	changed := map[string]func(*corev1.Node){
		"cordoned":    func(n *corev1.Node) { n.Spec.Unschedulable = true },
		"not Ready":   withReady(corev1.ConditionUnknown),
		"tainted":     withTaint("dedicated", "gpu", corev1.TaintEffectNoExecute),
		"labelled cp": func(n *corev1.Node) { n.Labels[controlPlaneLabel] = "" },
	}
	for name, edit := range changed {
		cur := base.DeepCopy()
		edit(cur)
		if !nodeMatters(base, cur) || !nodeMatters(cur, base) {
			t.Errorf("%s: nodeMatters = false both ways, want true", name)
		}
	}
	beat := base.DeepCopy()
	beat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	if nodeMatters(base, beat) {
		t.Error("a heartbeat alone requeues every cache")
	}
}

package controller_test

import (
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

// quota creates a ResourceQuota with hard limits and writes its status as
// the quota controller would (none runs here): nothing used yet.
func (e *env) quota(hard corev1.ResourceList) {
	e.t.Helper()
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pin-quota", Namespace: e.ns}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	created, err := e.admin.CoreV1().ResourceQuotas(e.ns).Create(e.ctx, q, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	used := corev1.ResourceList{}
	for name := range hard {
		used[name] = resource.MustParse("0")
	}
	created.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	if _, err := e.admin.CoreV1().ResourceQuotas(e.ns).UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// twoByTwo is a cache of two public images for the test's selected nodes.
func (e *env) twoByTwo(name string) {
	e.t.Helper()
	e.applyCache(name, fmt.Sprintf("  cacheSpec:\n  - images: [registry.test/public/a:1, registry.test/public/b:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
}

// A namespace that enforces Pod Security "restricted" and a quota on
// requests and limits of CPU and memory admits the controller's pre-pull
// pods: the cache succeeds there like anywhere.
func TestPrepullPodsPassRestrictedAndLimitsQuota(t *testing.T) {
	e := newEnv(t)
	e.addNode("n1", true)
	e.addNode("n2", true)
	patch := `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/enforce-version":"latest"}}}`
	if _, err := e.admin.CoreV1().Namespaces().Patch(e.ctx, e.ns, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.quota(corev1.ResourceList{
		corev1.ResourceLimitsCPU: resource.MustParse("1"), corev1.ResourceLimitsMemory: resource.MustParse("1Gi"),
		corev1.ResourceRequestsCPU: resource.MustParse("1"), corev1.ResourceRequestsMemory: resource.MustParse("1Gi"),
		corev1.ResourcePods: resource.MustParse("20"),
	})
	e.startController(controller.Config{})
	e.twoByTwo("web")
	ic := e.waitDone("web", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts == nil || ic.Status.Counts.Succeeded != 4 {
		t.Fatalf("status %+v counts %+v failures %+v, want 4 pulled", ic.Status.Status, ic.Status.Counts, ic.Status.Failures)
	}
	q, err := e.admin.CoreV1().ResourceQuotas(e.ns).Get(e.ctx, "pin-quota", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if used := q.Status.Used[corev1.ResourceLimitsCPU]; used.IsZero() {
		t.Errorf("the quota counted no CPU limits: %v", q.Status.Used)
	}
}

// refusedCache runs a cache whose every pre-pull pod the namespace refuses,
// one pod per node at a time (so the refusals come in several rounds), and
// checks that the action fails with reason on every (node, image), that
// exactly one Warning event with that reason names the cache, and that no
// pod exists.
func (e *env) refusedCache(reason, says string) {
	e.t.Helper()
	e.addNode("n1", true)
	e.addNode("n2", true)
	e.startController(controller.Config{MaxInFlightPerNode: 1})
	e.twoByTwo("web")
	ic := e.waitDone("web", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusFailed || ic.Status.Counts == nil || ic.Status.Counts.Failed != 4 {
		e.t.Fatalf("status %q counts %+v, want Failed with 4 failed", ic.Status.Status, ic.Status.Counts)
	}
	for image, fails := range ic.Status.Failures {
		for _, f := range fails {
			if f.Reason != reason || !strings.Contains(f.Message, says) {
				e.t.Errorf("%s on %s: %s %q, want %s saying %q", image, f.Node, f.Reason, f.Message, reason, says)
			}
		}
	}
	warnings := func() []corev1.Event {
		sel := fields.Set{"involvedObject.name": "web", "type": corev1.EventTypeWarning, "reason": reason}.String()
		list, err := e.admin.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			e.t.Fatal(err)
		}
		return list.Items
	}
	e.waitFor("a Warning event "+reason, func() bool { return len(warnings()) > 0 })
	// The action's own Failed event comes after the refusals' events: once
	// it is there, every event of the action was sent.
	e.waitFor("the action's Failed event", func() bool {
		list, err := e.admin.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": "web", "reason": string(api.ActionStatusFailed)}.String()})
		return err == nil && len(list.Items) > 0
	})
	if w := warnings(); len(w) != 1 || w[0].Count > 1 || !strings.Contains(w[0].Message, says) {
		e.t.Errorf("Warning events %s: %+v, want exactly one, once, saying %q", reason, w, says)
	}
	if pods := e.managedPods(); len(pods) != 0 {
		e.t.Errorf("%d pre-pull pods exist in a namespace that refuses them", len(pods))
	}
}

// A namespace whose quota allows no pod: the cache fails, naming the quota,
// instead of staying Processing.
func TestQuotaRefusalFailsTheCache(t *testing.T) {
	e := newEnv(t)
	e.quota(corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")})
	e.refusedCache("QuotaRefused", "exceeded quota: pin-quota")
}

// A namespace where an admin's admission policy denies the controller's
// pods: the cache fails, naming the policy.
func TestPolicyDenialFailsTheCache(t *testing.T) {
	e := newEnv(t)
	name := "pin-test-deny-" + e.ns
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionv1.Validation{{Expression: "false", Message: "no pre-pull pods in this namespace"}},
		}}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	if _, err := e.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(e.ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(t.Context(), name, metav1.DeleteOptions{})
		_ = e.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(t.Context(), name, metav1.DeleteOptions{})
	})
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x:1"}}}}
	e.waitFor("the test's policy is enforced", func() bool {
		_, err := e.admin.CoreV1().Pods(e.ns).Create(e.ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "no pre-pull pods in this namespace")
	})
	e.refusedCache("AdmissionPolicyDenied", "no pre-pull pods in this namespace")
}

// A quota at its limit only because of the controller's own pods still
// pulling there is not a refusal: the request waits and is created once
// they finish, and the cache succeeds. (The quota controller does not run
// here; the test frees the quota's usage as it would.)
func TestQuotaFullOfOwnPodsWaits(t *testing.T) {
	e := newEnv(t)
	node := e.addNode("n", true)
	e.quota(corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
	e.kubelet.Pause(node)
	e.startController(controller.Config{MaxInFlightPerNode: 2})
	e.twoByTwo("web")
	// Both pods are created in one round: one is admitted, the quota
	// refuses the other while the first one pulls.
	e.waitFor("one pre-pull pod admitted", func() bool { return len(e.managedPods()) == 1 })
	q, err := e.admin.CoreV1().ResourceQuotas(e.ns).Get(e.ctx, "pin-quota", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ic := e.cache("web"); ic.Status.Failures != nil {
		t.Fatalf("failures %+v while the controller's own pod holds the quota", ic.Status.Failures)
	}
	q.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	if _, err := e.admin.CoreV1().ResourceQuotas(e.ns).UpdateStatus(e.ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kubelet.Resume(node)
	ic := e.waitDone("web", api.ReasonImageCacheCreate)
	if ic.Status.Status != api.ActionStatusSucceeded || ic.Status.Counts == nil || ic.Status.Counts.Succeeded != 2 {
		t.Fatalf("status %q counts %+v failures %+v, want both pulled", ic.Status.Status, ic.Status.Counts, ic.Status.Failures)
	}
}

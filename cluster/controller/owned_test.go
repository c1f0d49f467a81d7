package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/api"
	"github.com/pullrecords/pullrecords/cluster/apiservertest"
	"github.com/pullrecords/pullrecords/cluster/controller"
)

const managedBy = "app.kubernetes.io/managed-by"

// tenantClient acts as a tenant: its own service account in its own
// namespace, allowed to manage pods there by a Role of its namespace.
func (e *env) tenantClient() kubernetes.Interface {
	e.t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant-pods", Namespace: e.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"},
			Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}}}
	if _, err := e.admin.RbacV1().Roles(e.ns).Create(e.ctx, role, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-pods", Namespace: e.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: e.ns}}}
	if _, err := e.admin.RbacV1().RoleBindings(e.ns).Create(e.ctx, rb, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	cfg, err := apiservertest.Current().ServiceAccountConfig(e.ctx, e.ns, "tenant", "")
	if err != nil {
		e.t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// A tenant may not make a pod look like a pre-pull pod: creating one with
// the controller's label, even owned by its own ImageCache, or adding the
// label to its pod, is refused by admission; its ordinary pods are not.
func TestTenantCannotLabelPodsAsTheController(t *testing.T) {
	e := newEnv(t)
	node := e.addNode("n", true)
	tenant := e.tenantClient()
	e.applyCache("mine", "  cacheSpec:\n  - images: [x:1]\n    nodeSelector: {none: none}\n")
	ic := e.cache("mine")
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "kubefledged.io/v1alpha2", Kind: "ImageCache", Name: ic.Name, UID: ic.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: ptr.To(false), RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "registry.test/private/x:1"}}},
		}
	}
	const refusal = "only the pullrecords controller"
	// The API server loads policies asynchronously: wait, with dry runs,
	// until it enforces them (a bounded wait; never reaching it fails).
	labelled := map[string]string{managedBy: "pullrecords-controller"}
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, err = tenant.CoreV1().Pods(e.ns).Create(e.ctx, pod("probe", labelled), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), refusal) {
			break
		}
	}
	_, err = tenant.CoreV1().Pods(e.ns).Create(e.ctx, pod("fake-prepull", labelled), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), refusal) {
		t.Errorf("a tenant created a pod labelled as the controller's: %v", err)
	}
	if _, err := tenant.CoreV1().Pods(e.ns).Create(e.ctx, pod("plain", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a tenant's ordinary pod was refused: %v", err)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"pullrecords-controller"}}}`, managedBy)
	_, err = tenant.CoreV1().Pods(e.ns).Patch(e.ctx, "plain", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), refusal) {
		t.Errorf("a tenant labelled its pod as the controller's: %v", err)
	}
	// Its other labels stay its own to change.
	if _, err := tenant.CoreV1().Pods(e.ns).Patch(e.ctx, "plain", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"api"}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Errorf("a tenant could not relabel its own pod: %v", err)
	}
}

// Labelled pods the controller did not make (created past admission, as a
// cluster admin may, or before the policy existed) neither use the
// pre-pull budget nor get deleted: only pods controlled by an ImageCache
// the controller knows, by UID, are its own.
func TestForeignLabelledPodsNeitherCountNorGetDeleted(t *testing.T) {
	e := newEnv(t)
	node := e.addNode("a", true)
	other := e.addNode("b", false)
	e.applyCache("c", fmt.Sprintf("  cacheSpec:\n  - images: [x:1, y:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
	ic := e.cache("c")
	labels := map[string]string{managedBy: "pullrecords-controller", "pullrecords.io/cache-uid": string(ic.UID), "pullrecords.io/batch": "0-old"}
	// With the cache's annotation, the pod says it is one of the cache's;
	// without, it only fills its node.
	foreign := func(name, onNode string, owner []metav1.OwnerReference, annotated bool) {
		t.Helper()
		var annotations map[string]string
		if annotated {
			annotations = map[string]string{"pullrecords.io/cache": e.ns + "/c", "pullrecords.io/image": "registry.test/private/x:1"}
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: labels, OwnerReferences: owner, Annotations: annotations},
			// A private image without a secret: the stand-in kubelet keeps
			// it Pending in ErrImagePull, so it would count as pulling.
			Spec: corev1.PodSpec{NodeName: onNode, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "prepull", Image: "registry.test/private/x:1"}}},
		}
		if _, err := e.admin.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wrongUID := []metav1.OwnerReference{{APIVersion: "kubefledged.io/v1alpha2", Kind: "ImageCache", Name: "c",
		UID: types.UID("00000000-0000-0000-0000-000000000000"), Controller: ptr.To(true)}}
	notController := []metav1.OwnerReference{{APIVersion: "kubefledged.io/v1alpha2", Kind: "ImageCache", Name: "c", UID: ic.UID}}
	foreign("idle-1", node, nil, false)
	foreign("idle-2", node, wrongUID, false)
	foreign("idle-3", other, notController, true)
	e.waitFor("the foreign pods pending in ErrImagePull", func() bool {
		n := 0
		for _, p := range e.managedPods() {
			if len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil {
				n++
			}
		}
		return n == 3
	})
	e.startController(controller.Config{MaxInFlightPerNode: 2, MaxInFlight: 3})
	done := e.waitDone("c", api.ReasonImageCacheCreate)
	if done.Status.Status != api.ActionStatusSucceeded || done.Status.Counts.Succeeded != 2 {
		t.Errorf("status %+v counts %+v", done.Status, done.Status.Counts)
	}
	// Deleting the cache deletes its own pods only.
	if err := e.dyn.Resource(api.ImageCacheResource).Namespace(e.ns).Delete(e.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.applyCache("after", fmt.Sprintf("  cacheSpec:\n  - images: [z:1]\n    nodeSelector: {%s: \"yes\"}\n", e.label))
	e.waitDone("after", api.ReasonImageCacheCreate)
	for _, name := range []string{"idle-1", "idle-2", "idle-3"} {
		p, err := e.admin.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("the controller deleted a pod it does not own: %s: %v", name, err)
		}
	}
}

// A pod the controller did not create that holds a pre-pull pod's name
// (left from before the policy, or made by an admin) says nothing of a
// pull: even Succeeded, it gives a failed result, never "pulled".
func TestSquattedPodNameIsNotAPull(t *testing.T) {
	e := newEnv(t)
	node := e.addNode("n", true)
	e.kubelet.Pause(node)
	e.startController(controller.Config{})
	e.applyCache("c", fmt.Sprintf("  cacheSpec:\n  - images: [registry.test/private/app:1]\n    nodeSelector: {%s: \"yes\"}\n  imagePullSecrets: [{name: regcred}]\n", e.label))
	e.waitFor("the pre-pull pod", func() bool { return len(e.managedPods()) == 1 })
	e.stopController()
	ours := e.managedPods()[0]
	if err := e.admin.CoreV1().Pods(e.ns).Delete(e.ctx, ours.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("our pod gone", func() bool { return len(e.managedPods()) == 0 })
	squat := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ours.Name, Namespace: e.ns, Labels: ours.Labels, Annotations: ours.Annotations,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubefledged.io/v1alpha2", Kind: "ImageCache", Name: "c",
			UID: types.UID("00000000-0000-0000-0000-000000000000"), Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "prepull", Image: "registry.test/private/app:1"}}}}
	squat, err := e.admin.CoreV1().Pods(e.ns).Create(e.ctx, squat, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	squat.Status.Phase = corev1.PodSucceeded
	if _, err := e.admin.CoreV1().Pods(e.ns).UpdateStatus(e.ctx, squat, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startController(controller.Config{})
	ic := e.waitDone("c", api.ReasonImageCacheCreate)
	f := ic.Status.Failures["registry.test/private/app:1"]
	if ic.Status.Status != api.ActionStatusFailed || ic.Status.Counts.Succeeded != 0 || len(f) != 1 || f[0].Reason != "PodNameTaken" {
		t.Errorf("a squatted pod name counted as a pull: status %q counts %+v failures %+v", ic.Status.Status, ic.Status.Counts, ic.Status.Failures)
	}
	if p, err := e.admin.CoreV1().Pods(e.ns).Get(e.ctx, squat.Name, metav1.GetOptions{}); err != nil || p.UID != squat.UID || p.DeletionTimestamp != nil {
		t.Errorf("the squatting pod was deleted: %v", err)
	}
}

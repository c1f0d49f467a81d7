package controller_test

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pullrecords/pullrecords/cluster/controller"
)

// Words of each validation's message in admission.yaml policy 2.
const (
	denyOwner    = "controlled by an ImageCache, its only owner"
	denyIdentity = "name its owning ImageCache"
	denyNode     = "bound to a node"
	denyToken    = "service account token"
	denyHost     = "host namespaces"
	denyVolume   = "exactly one volume"
	denyInit     = "exactly one init container"
	denyApp      = "1 to 64 containers, each named prepull-<n>"
	denyEnv      = "no env or envFrom"
	denyPorts    = "no ports"
	denyMounts   = "mount only the noop volume"
	denyHooks    = "no probes or lifecycle hooks"
	denyCaps     = "drop ALL capabilities"
	denySeccomp  = "seccomp profile RuntimeDefault"
	denyRoot     = "non-root user"
	denyOptions  = "no SELinux, AppArmor"
	denyLimits   = "CPU and memory limits of at most"
	denyPodRes   = "must have pod-level resources"
	denyPodMisc  = "restart policy Never"
)

// denyOverPod is the API server's own validation, before admission: no
// container's limit may exceed the pod-level one.
const denyOverPod = "must be less than or equal to pod limits"

// The controller's token creates exactly the pod prepullPod builds and
// nothing else: starting from that pod (admitted), each change of one
// field a stolen token could use is denied, with the message of the rule
// that pins it.
func TestAdmissionPinsPrepullPods(t *testing.T) {
	e := newEnv(t)
	node := e.addNode("a", true)
	ctl := kubernetes.NewForConfigOrDie(e.ctlCfg)
	e.applyCache("own", "  cacheSpec:\n  - images: [registry.test/x:1]\n    nodeSelector: {none: none}\n")
	ic := e.cache("own")
	e.applyCache("other", "  cacheSpec:\n  - images: [registry.test/x:1]\n    nodeSelector: {none: none}\n")
	other := e.cache("other")
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "pin-test-unconfined"}, Handler: "unconfined"}
	if _, err := e.admin.NodeV1().RuntimeClasses().Create(e.ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg := controller.Config{NoopImage: testNoopImage}
	base := controller.PrepullPodForTest(cfg, ic, node, "registry.test/x:1", "registry.test/y:1", "registry.test/z:1")
	images := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("registry.test/img-%d:1", i)
		}
		return out
	}
	// withImages replaces p by the controller's pod for n images, keeping
	// p's name.
	withImages := func(n int) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			name := p.Name
			*p = *controller.PrepullPodForTest(cfg, ic, node, images(n)...)
			p.Name = name
		}
	}

	// The pod as built is admitted (really created once).
	if _, err := ctl.CoreV1().Pods(e.ns).Create(e.ctx, base.DeepCopy(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the controller's own pre-pull pod was refused: %v", err)
	}

	app := func(p *corev1.Pod) *corev1.Container { return &p.Spec.Containers[0] }
	ini := func(p *corev1.Pod) *corev1.Container { return &p.Spec.InitContainers[0] }
	secretEnv := corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "regcred"}, Key: "password"}}}
	cases := []struct {
		name   string
		mutate func(*corev1.Pod)
		denied string
	}{
		{"unchanged", func(*corev1.Pod) {}, ""},
		// Owner, labels, namespace.
		{"no owner", func(p *corev1.Pod) { p.OwnerReferences = nil }, denyOwner},
		{"two owner refs", func(p *corev1.Pod) {
			p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u"})
		}, denyOwner},
		{"owner not controller", func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }, denyOwner},
		{"owner of another kind", func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "Deployment" }, denyOwner},
		{"another namespace's cache", func(p *corev1.Pod) { p.Annotations["pullrecords.io/cache"] = "kube-system/own" }, denyIdentity},
		{"uid label of another cache", func(p *corev1.Pod) { p.Labels["pullrecords.io/cache-uid"] = string(other.UID) }, denyIdentity},
		{"annotation names another cache", func(p *corev1.Pod) { p.Annotations["pullrecords.io/cache"] = e.ns + "/other" }, denyIdentity},
		{"no managed-by label", func(p *corev1.Pod) { delete(p.Labels, "app.kubernetes.io/managed-by") }, denyIdentity},
		// Node and identity.
		{"not bound", func(p *corev1.Pod) { p.Spec.NodeName = "" }, denyNode},
		{"token mounted", func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil }, denyToken},
		{"another service account", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "pullrecords-controller" }, denyToken},
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, denyHost},
		{"host PID", func(p *corev1.Pod) { p.Spec.HostPID = true }, denyHost},
		{"host IPC", func(p *corev1.Pod) { p.Spec.HostIPC = true }, denyHost},
		{"shared process namespace", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }, denyHost},
		{"host aliases", func(p *corev1.Pod) {
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"registry.test"}}}
		}, denyHost},
		// Volumes and mounts.
		{"host path volume", func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		}, denyVolume},
		{"second volume", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}, denyVolume},
		{"secret volume", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "regcred"}}})
		}, denyVolume},
		{"memory emptyDir", func(p *corev1.Pod) { p.Spec.Volumes[0].EmptyDir.Medium = corev1.StorageMediumMemory }, denyVolume},
		{"unbounded emptyDir", func(p *corev1.Pod) { p.Spec.Volumes[0].EmptyDir.SizeLimit = nil }, denyVolume},
		{"large emptyDir", func(p *corev1.Pod) { p.Spec.Volumes[0].EmptyDir.SizeLimit = ptr.To(resource.MustParse("10Gi")) }, denyVolume},
		{"writable mount in prepull", func(p *corev1.Pod) { app(p).VolumeMounts[0].ReadOnly = false }, denyMounts},
		{"mount elsewhere", func(p *corev1.Pod) { ini(p).VolumeMounts[0].MountPath = "/etc" }, denyMounts},
		{"sub path", func(p *corev1.Pod) { app(p).VolumeMounts[0].SubPath = "x" }, denyMounts},
		// Containers: images and commands.
		{"another command", func(p *corev1.Pod) { app(p).Command = []string{"/bin/sh", "-c", "curl evil"} }, denyApp},
		{"args", func(p *corev1.Pod) { app(p).Args = []string{"x"} }, denyApp},
		{"no command", func(p *corev1.Pod) { app(p).Command = nil }, denyApp},
		{"image not the annotated one", func(p *corev1.Pod) { app(p).Image = "registry.test/evil:1" }, denyApp},
		{"a later container's image not the annotated one", func(p *corev1.Pod) { p.Spec.Containers[2].Image = "registry.test/evil:1" }, denyApp},
		{"annotation and image changed together", func(p *corev1.Pod) {
			// Allowed: the annotation is not a look-up of the cache's images
			// (see admission.yaml), only the record of what each container pulls.
			p.Spec.Containers[1].Image = "registry.test/other:1"
			p.Annotations["pullrecords.io/image.prepull-1"] = "registry.test/other:1"
		}, ""},
		{"a container without its annotation", func(p *corev1.Pod) { delete(p.Annotations, "pullrecords.io/image.prepull-1") }, denyApp},
		{"annotation of another container's name", func(p *corev1.Pod) {
			p.Spec.Containers[1].Name = "prepull-7"
		}, denyApp},
		{"the old single container name", func(p *corev1.Pod) {
			p.Annotations["pullrecords.io/image.prepull"] = app(p).Image
			app(p).Name = "prepull"
		}, denyApp},
		{"one image", withImages(1), ""},
		{"64 images", withImages(64), ""},
		{"65 images", func(p *corev1.Pod) {
			withImages(65)(p)
			// Else validation refuses first: 65 requests of 1m and 1Mi.
			p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
			p.Spec.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("100Mi")
		}, denyApp},
		{"second container", func(p *corev1.Pod) {
			c := *app(p).DeepCopy()
			c.Name = "second"
			p.Spec.Containers = append(p.Spec.Containers, c)
		}, denyApp},
		{"renamed container", func(p *corev1.Pod) { app(p).Name = "main" }, denyApp},
		{"extra init container of another image", func(p *corev1.Pod) {
			c := *ini(p).DeepCopy()
			c.Name, c.Image = "extra", "registry.test/evil:1"
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}, denyInit},
		{"init container of another image", func(p *corev1.Pod) { ini(p).Image = "registry.test/evil:1" }, denyInit},
		{"init container command", func(p *corev1.Pod) { ini(p).Command = []string{"/pullrecords-noop", "install", "/etc/x"} }, denyInit},
		{"init container args", func(p *corev1.Pod) { ini(p).Args = []string{"more"} }, denyInit},
		{"no init container", func(p *corev1.Pod) { p.Spec.InitContainers = nil }, denyInit},
		{"sidecar init container", func(p *corev1.Pod) { ini(p).RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways) }, denyInit},
		// Environment, ports, hooks.
		{"env from a Secret", func(p *corev1.Pod) { app(p).Env = []corev1.EnvVar{secretEnv} }, denyEnv},
		{"env in init container", func(p *corev1.Pod) { ini(p).Env = []corev1.EnvVar{{Name: "A", Value: "b"}} }, denyEnv},
		{"envFrom a Secret", func(p *corev1.Pod) {
			app(p).EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "regcred"}}}}
		}, denyEnv},
		{"host port", func(p *corev1.Pod) { app(p).Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}} }, denyPorts},
		{"container port", func(p *corev1.Pod) { ini(p).Ports = []corev1.ContainerPort{{ContainerPort: 8080}} }, denyPorts},
		{"post-start hook", func(p *corev1.Pod) {
			app(p).Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh"}}}}
		}, denyHooks},
		{"liveness probe", func(p *corev1.Pod) {
			app(p).LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh"}}}}
		}, denyHooks},
		// Security context.
		{"added SYS_ADMIN", func(p *corev1.Pod) { app(p).SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"} }, denyCaps},
		{"added NET_ADMIN in init container", func(p *corev1.Pod) {
			ini(p).SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}, denyCaps},
		{"capabilities kept", func(p *corev1.Pod) { app(p).SecurityContext.Capabilities.Drop = nil }, denyCaps},
		{"privileged", func(p *corev1.Pod) {
			app(p).SecurityContext.Privileged = ptr.To(true)
			app(p).SecurityContext.AllowPrivilegeEscalation = nil
		}, denyCaps},
		{"privilege escalation", func(p *corev1.Pod) { app(p).SecurityContext.AllowPrivilegeEscalation = ptr.To(true) }, denyCaps},
		{"no container security context", func(p *corev1.Pod) { ini(p).SecurityContext = nil }, denyCaps},
		{"unconfined seccomp", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, denySeccomp},
		{"no seccomp", func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile = nil }, denySeccomp},
		{"container overrides seccomp", func(p *corev1.Pod) {
			app(p).SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, denySeccomp},
		{"root", func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr.To[int64](0) }, denyRoot},
		{"root in a container", func(p *corev1.Pod) { app(p).SecurityContext.RunAsUser = ptr.To[int64](0) }, denyRoot},
		{"may run as root", func(p *corev1.Pod) { ini(p).SecurityContext.RunAsNonRoot = ptr.To(false) }, denyRoot},
		{"root group", func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsGroup = ptr.To[int64](0) }, denyRoot},
		{"supplemental root group", func(p *corev1.Pod) { p.Spec.SecurityContext.SupplementalGroups = []int64{0} }, denyRoot},
		{"SELinux type", func(p *corev1.Pod) { app(p).SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"} }, denyOptions},
		{"AppArmor unconfined", func(p *corev1.Pod) {
			p.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, denyOptions},
		{"sysctl", func(p *corev1.Pod) {
			p.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}
		}, denyOptions},
		// Resources and the rest of the pod.
		// Pod-level resources: present, CPU and memory only, bounded.
		{"no pod-level resources", func(p *corev1.Pod) { p.Spec.Resources = nil }, denyPodRes},
		{"64 images without pod-level limits", func(p *corev1.Pod) {
			// The API server defaults them to the containers' sum (64 x 50m).
			withImages(64)(p)
			p.Spec.Resources.Limits = nil
		}, denyPodRes},
		{"large pod-level CPU limit", func(p *corev1.Pod) { p.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("4") }, denyPodRes},
		{"large pod-level memory limit", func(p *corev1.Pod) {
			p.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("8Gi")
		}, denyPodRes},
		{"pod-level CPU request above bound", func(p *corev1.Pod) {
			p.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m")
			p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("150m")
		}, denyPodRes},
		{"pod-level memory request above bound", func(p *corev1.Pod) {
			p.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("256Mi")
			p.Spec.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("200Mi")
		}, denyPodRes},
		{"pod-level limits at the bound", func(p *corev1.Pod) {
			p.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m")
			p.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("256Mi")
			p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
			p.Spec.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
		}, ""},
		{"pod-level hugepages", func(p *corev1.Pod) {
			p.Spec.Resources.Limits["hugepages-2Mi"] = resource.MustParse("2Mi")
			p.Spec.Resources.Requests["hugepages-2Mi"] = resource.MustParse("2Mi")
		}, denyPodRes},
		{"pod-level resource claims", func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}}
		}, denyLimits},
		// Container resources: CPU and memory requests and limits, bounded.
		{"no limits", func(p *corev1.Pod) { app(p).Resources.Limits = nil }, denyLimits},
		{"no CPU limit", func(p *corev1.Pod) { delete(ini(p).Resources.Limits, corev1.ResourceCPU) }, denyLimits},
		{"container CPU limit above its bound", func(p *corev1.Pod) {
			p.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m")
			app(p).Resources.Limits[corev1.ResourceCPU] = resource.MustParse("150m")
		}, denyLimits},
		{"container memory limit above its bound", func(p *corev1.Pod) {
			ini(p).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("100Mi")
		}, denyLimits},
		{"large CPU limit", func(p *corev1.Pod) { app(p).Resources.Limits[corev1.ResourceCPU] = resource.MustParse("4") }, denyOverPod},
		{"large memory limit", func(p *corev1.Pod) { app(p).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("8Gi") }, denyOverPod},
		// Validation compares only the regular containers' limits with the
		// pod's: policy 2 bounds the init container's.
		{"large memory limit in the init container", func(p *corev1.Pod) {
			ini(p).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("8Gi")
		}, denyLimits},
		{"no requests", func(p *corev1.Pod) {
			// The API server defaults them to the limits (50m, 32Mi).
			app(p).Resources.Requests = nil
		}, denyLimits},
		{"container CPU request above bound", func(p *corev1.Pod) {
			app(p).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("10m")
		}, denyLimits},
		{"container memory request above bound", func(p *corev1.Pod) {
			ini(p).Resources.Requests[corev1.ResourceMemory] = resource.MustParse("8Mi")
		}, denyLimits},
		{"extended resource", func(p *corev1.Pod) {
			app(p).Resources.Limits["example.com/gpu"] = resource.MustParse("1")
			app(p).Resources.Requests["example.com/gpu"] = resource.MustParse("1")
		}, denyLimits},
		{"LimitRange's ephemeral-storage default", func(p *corev1.Pod) {
			app(p).Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
			app(p).Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}, ""},
		{"restart always", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyAlways }, denyPodMisc},
		{"runtime class", func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To(rc.Name) }, denyPodMisc},
	}
	for i, tc := range cases {
		p := base.DeepCopy()
		p.Name = fmt.Sprintf("pin-%d", i)
		tc.mutate(p)
		_, err := ctl.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case tc.denied == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.denied != "" && err == nil:
			t.Errorf("%s: admitted, want a denial mentioning %q", tc.name, tc.denied)
		case tc.denied != "" && !strings.Contains(err.Error(), tc.denied):
			t.Errorf("%s: got %v, want a denial mentioning %q", tc.name, err, tc.denied)
		}
	}

	// The init container's image is the one of the policy's parameter:
	// changed there, the same pod is denied until it changes back.
	if err := setNoopImage(e.ctx, "registry.test/another-noop:1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setNoopImage(t.Context(), testNoopImage) })
	e.waitFor("the policy reads the changed no-op image", func() bool {
		p := base.DeepCopy()
		p.Name = "pin-param"
		_, err := ctl.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), denyInit)
	})
	if err := setNoopImage(e.ctx, testNoopImage); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the policy reads the test's no-op image again", func() bool {
		p := base.DeepCopy()
		p.Name = "pin-param"
		_, err := ctl.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
}

// The controller's token deletes only its own pre-pull pods and
// kube-fledged's image-manager Jobs: a tenant's pod, a pod labelled by an
// admin but owned by no ImageCache, and any other Job are refused; a
// collection delete is not granted at all.
func TestControllerDeletesOnlyItsOwn(t *testing.T) {
	e := newEnv(t)
	node := e.addNode("a", true)
	ctl := kubernetes.NewForConfigOrDie(e.ctlCfg)
	tenant := e.tenantClient()
	e.applyCache("own", "  cacheSpec:\n  - images: [registry.test/x:1]\n    nodeSelector: {none: none}\n")
	ic := e.cache("own")

	own := controller.PrepullPodForTest(controller.Config{NoopImage: testNoopImage}, ic, node, "registry.test/x:1")
	if _, err := ctl.CoreV1().Pods(e.ns).Create(e.ctx, own, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tenant-app", Namespace: e.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.test/app:1"}}}}
	if _, err := tenant.CoreV1().Pods(e.ns).Create(e.ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Labelled as the controller's (only an admin may), owned by no cache.
	lookAlike := plain.DeepCopy()
	lookAlike.Name, lookAlike.Labels = "look-alike", map[string]string{managedBy: "pullrecords-controller"}
	if _, err := e.admin.CoreV1().Pods(e.ns).Create(e.ctx, lookAlike, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	del := func(name string) error {
		return ctl.CoreV1().Pods(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}
	for _, name := range []string{plain.Name, lookAlike.Name} {
		if err := del(name); err == nil || !strings.Contains(err.Error(), "may delete only its own pre-pull pods") {
			t.Errorf("the controller deleting pod %s: %v, want a denial", name, err)
		}
	}
	if err := ctl.CoreV1().Pods(e.ns).DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the controller deleted a collection of pods: %v, want Forbidden", err)
	}
	for _, name := range []string{plain.Name, lookAlike.Name} {
		if _, err := e.admin.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("pod %s is gone: %v", name, err)
		}
	}
	if err := del(own.Name); err != nil {
		t.Errorf("the controller could not delete its own pre-pull pod: %v", err)
	}

	job := func(name string, labels map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: labels},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "registry.test/app:1"}}}}}}
	}
	for _, j := range []*batchv1.Job{
		job("kubefledged-leftover", map[string]string{"app": "kubefledged", "kubefledged": "kubefledged-image-manager"}),
		job("tenant-batch", nil),
	} {
		if _, err := e.admin.BatchV1().Jobs(e.ns).Create(e.ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	background := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	if err := ctl.BatchV1().Jobs(e.ns).Delete(e.ctx, "tenant-batch", background); err == nil || !strings.Contains(err.Error(), "may delete only") {
		t.Errorf("the controller deleting a tenant's Job: %v, want a denial", err)
	}
	if err := ctl.BatchV1().Jobs(e.ns).Delete(e.ctx, "kubefledged-leftover", background); err != nil {
		t.Errorf("the controller could not delete kube-fledged's leftover Job: %v", err)
	}
}

package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// Node labels and taints that mark a control-plane node: the current one and
// the legacy one older installers still set.
const (
	controlPlaneLabel = "node-role.kubernetes.io/control-plane"
	legacyMasterLabel = "node-role.kubernetes.io/master"
)

// Placement is where pre-pull pods may go; the cluster admin sets it in the
// controller's configuration, a tenant cannot widen it. A pre-pull pod is
// bound by spec.nodeName, so no scheduler filters it and the kubelet admits
// it whatever the node's taints: the controller itself checks every node
// against Placement before it creates a pod there, and a node that fails
// gets no pod (its (node, image) pairs are counted as skipped, with the
// reason, in the cache's status).
//
// The zero value is the default: no control-plane node (labelled
// node-role.kubernetes.io/control-plane or the legacy
// node-role.kubernetes.io/master), no cordoned node (spec.unschedulable),
// no node whose Ready condition is not True, and no node with a NoSchedule
// or NoExecute taint that Tolerations do not tolerate (PreferNoSchedule
// taints are ignored). The taints node.kubernetes.io/not-ready,
// unreachable and unschedulable are left to the Ready and cordon rules,
// whose state they mirror. Pre-pull pods then carry no toleration.
type Placement struct {
	// Tolerations are the taints pre-pull pods may land on; they are the
	// pods' only tolerations, with those the Include fields below add.
	// Each one grants every tenant's cache the right to pull its images,
	// with its secrets, on every node whose taint it tolerates (a
	// dedicated pool's nodes, for one). An empty key with operator Exists
	// tolerates every taint. Only the Exists and Equal operators are
	// accepted (New refuses the others).
	Tolerations []corev1.Toleration
	// IncludeControlPlane lets pre-pull pods onto control-plane nodes,
	// tolerating the control-plane NoSchedule taints too: every tenant's
	// images, pulled with its secrets, then land next to the API server
	// and etcd.
	IncludeControlPlane bool
	// IncludeCordoned lets pre-pull pods onto cordoned nodes (tolerating
	// node.kubernetes.io/unschedulable:NoSchedule): a node drained for
	// maintenance or retirement keeps getting images.
	IncludeCordoned bool
	// IncludeNotReady lets pre-pull pods onto nodes whose Ready condition
	// is not True (tolerating the not-ready and unreachable taints of every
	// effect). Discouraged: a node whose kubelet is gone never answers, so
	// each of its pods holds the cache's action for the whole pull
	// deadline, MaxInFlightPerNode pods at a time; and a node not Ready
	// for a reason other than a dead kubelet may still run the pod.
	IncludeNotReady bool
}

// Reasons a node is not eligible, as they appear in the cache's status.
const (
	skipControlPlane = "control-plane"
	skipCordoned     = "cordoned"
	skipNotReady     = "not Ready"
)

// ruleTaints are the taints the controller-manager mirrors from what the
// rules above already look at (the Ready condition, spec.unschedulable):
// the rule decides, not the taint, which lags behind it (and stays for
// good where no controller-manager runs: the API server's
// TaintNodesByCondition admission puts not-ready on every new Node).
var ruleTaints = map[string]bool{
	corev1.TaintNodeNotReady:      true,
	corev1.TaintNodeUnreachable:   true,
	corev1.TaintNodeUnschedulable: true,
}

// ineligible returns why pre-pull pods may not go to node under p, or ""
// when they may. It looks at the node only (no API call).
func (p Placement) ineligible(node *corev1.Node) string {
	if node == nil {
		return "node gone"
	}
	if !p.IncludeControlPlane && isControlPlane(node) {
		return skipControlPlane
	}
	if !p.IncludeCordoned && node.Spec.Unschedulable {
		return skipCordoned
	}
	if !p.IncludeNotReady && !isReady(node) {
		return skipNotReady
	}
	tolerations := p.podTolerations()
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute || ruleTaints[t.Key] {
			continue
		}
		if !tolerated(tolerations, t) {
			return "taint " + taintText(t) + " not tolerated"
		}
	}
	return ""
}

// podTolerations are the tolerations a pre-pull pod carries: the admin's,
// then those each Include field implies, and nothing else. A nil result
// means none.
func (p Placement) podTolerations() []corev1.Toleration {
	out := append([]corev1.Toleration(nil), p.Tolerations...)
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	if p.IncludeControlPlane {
		out = append(out, exists(controlPlaneLabel, corev1.TaintEffectNoSchedule), exists(legacyMasterLabel, corev1.TaintEffectNoSchedule))
	}
	if p.IncludeCordoned {
		out = append(out, exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule))
	}
	if p.IncludeNotReady {
		out = append(out, exists(corev1.TaintNodeNotReady, ""), exists(corev1.TaintNodeUnreachable, ""))
	}
	return out
}

// validate rejects tolerations the API server would refuse on a pod, so
// that a bad configuration fails at start-up and not at every pod.
func (p Placement) validate() error {
	for _, t := range p.Tolerations {
		if err := validToleration(t); err != nil {
			return fmt.Errorf("%w: placement toleration %s: %v", ErrInvalidConfig, tolerationText(t), err)
		}
	}
	return nil
}

func isControlPlane(node *corev1.Node) bool {
	_, cp := node.Labels[controlPlaneLabel]
	_, master := node.Labels[legacyMasterLabel]
	return cp || master
}

// isReady reports whether the node's Ready condition is True; a node that
// reports no Ready condition (its kubelet never posted status) is not.
func isReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func tolerated(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

// taintText writes a taint as kubectl taint does: key[=value]:Effect.
func taintText(t *corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

func tolerationText(t corev1.Toleration) string {
	s := t.Key
	if t.Operator == corev1.TolerationOpExists && t.Key == "" {
		s = "Exists"
	} else if t.Value != "" {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	return s
}

// ParseToleration reads a toleration as the controller's
// --prepull-toleration flag takes it:
//
//	key=value:Effect   tolerates the taint key=value with that effect (Equal)
//	key:Effect         tolerates taint key, any value, with that effect (Exists)
//	Exists             tolerates every taint (what pre-pull pods had before
//	                   placement existed: every node, dedicated or not)
//
// Effect is NoSchedule, NoExecute or PreferNoSchedule; it is required, so
// that a toleration meant for NoSchedule does not also keep a pod on a
// node being evicted.
func ParseToleration(s string) (corev1.Toleration, error) {
	s = strings.TrimSpace(s)
	if s == string(corev1.TolerationOpExists) {
		return corev1.Toleration{Operator: corev1.TolerationOpExists}, nil
	}
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return corev1.Toleration{}, fmt.Errorf("toleration %q: want key=value:Effect, key:Effect or Exists", s)
	}
	kv, effect := s[:i], corev1.TaintEffect(s[i+1:])
	t := corev1.Toleration{Key: kv, Operator: corev1.TolerationOpExists, Effect: effect}
	if k, v, ok := strings.Cut(kv, "="); ok {
		t = corev1.Toleration{Key: k, Operator: corev1.TolerationOpEqual, Value: v, Effect: effect}
	}
	if t.Key == "" {
		return corev1.Toleration{}, fmt.Errorf("toleration %q: a key is required (Exists alone tolerates every taint)", s)
	}
	if t.Effect == "" {
		return corev1.Toleration{}, fmt.Errorf("toleration %q: the effect is required (NoSchedule, NoExecute or PreferNoSchedule)", s)
	}
	if err := validToleration(t); err != nil {
		return corev1.Toleration{}, fmt.Errorf("toleration %q: %v", s, err)
	}
	return t, nil
}

func validToleration(t corev1.Toleration) error {
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule:
	default:
		return fmt.Errorf("unknown effect %q", t.Effect)
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		if t.Value != "" {
			return fmt.Errorf("operator Exists takes no value")
		}
	case "", corev1.TolerationOpEqual:
		if t.Key == "" {
			return fmt.Errorf("operator Equal needs a key")
		}
	default:
		return fmt.Errorf("operator %q is not supported here (Exists or Equal)", t.Operator)
	}
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("key %q: %s", t.Key, strings.Join(errs, "; "))
		}
	}
	if t.Value != "" {
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return fmt.Errorf("value %q: %s", t.Value, strings.Join(errs, "; "))
		}
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		return fmt.Errorf("tolerationSeconds needs effect NoExecute")
	}
	return nil
}

// skips are the (node, image) pairs of an action that Placement keeps off
// their node: they get no pod and no result on the node's object, they
// are counted as skipped (neither pulled nor failed), and the cache's
// message names the nodes and why. They are decided again at every sync,
// so a node that becomes eligible is worked on at once (node changes
// requeue the caches). A sync keeps their number and each node's reason,
// not the pairs.
type skips struct {
	pairs int
	why   map[string]string // node -> why it is skipped
}

// add counts one pair of node skipped for reason.
func (s *skips) add(node, reason string) {
	if s.why == nil {
		s.why = map[string]string{}
	}
	s.pairs++
	s.why[node] = reason
}

// maxSkippedNamed caps the nodes a status message names.
const maxSkippedNamed = 10

// withSkipped adds the skipped pairs to a status aggregated over the other
// pairs: they count as desired and skipped, and the message says which
// nodes were skipped and why. With every pair skipped the status is
// NoImagesPulledOrDeleted; otherwise it is what the other pairs make it (a
// cache with no selector is not failed for the control-plane node it may
// not use), with the message saying the images are on the eligible nodes
// only.
func withSkipped(st api.ImageCacheStatus, skipped skips) api.ImageCacheStatus {
	if skipped.pairs == 0 {
		return st
	}
	counts := *st.Counts
	counts.Desired += int32(skipped.pairs)
	counts.Skipped = int32(skipped.pairs)
	st.Counts = &counts
	summary := skipped.summary()
	switch {
	case st.Status == api.ActionStatusNoImagesPulledOrDeleted:
		st.Message = "No image was pulled: " + summary
	case st.Status == api.ActionStatusSucceeded && st.Reason != api.ReasonImageCachePurge:
		st.Message = "Every image of the cache is on every selected node pre-pull pods may go to; " + summary
	default:
		st.Message += " " + summary
	}
	return st
}

// summary is "3 node(s) skipped: n1 not Ready, n2 cordoned, n3
// control-plane." (nodes by name, at most maxSkippedNamed named).
func (s skips) summary() string {
	nodes := make([]string, 0, len(s.why))
	for n := range s.why {
		nodes = append(nodes, n)
	}
	list := namedList(nodes, maxSkippedNamed, func(n string) string { return n + " " + s.why[n] })
	return fmt.Sprintf("%d node(s) skipped by the controller's placement rules: %s.", len(nodes), list)
}

//go:build clustere2e

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/apiservertest"
)

// controllerUser and agentUser are the service accounts the test runs the
// controller and the agents under.
const (
	controllerUser = "system:serviceaccount:" + agentNS + ":pullrecords-controller"
	agentUser      = "system:serviceaccount:" + agentNS + ":pullrecords-agent"
)

// apiCost is what one stretch of work cost the API server, from its audit
// log: every request the controller made, the requests kubelets made in
// the tenant's namespace (the pre-pull pods' reads, status writes and
// Events, the pull secret's reads; their node heartbeats and leases are
// not the cache's cost), the agents' requests, and the Events written in
// that namespace. Watches are left out: they are opened once, not per
// pull.
type apiCost struct {
	controller, kubelet, agent, events int
	byKind                             map[string]int // "kubelet get pods" -> n
	// writes lists the controller's writes in order, each with its time
	// since the first request counted, its object and its answer: where
	// a regression's requests went.
	writes []string
}

// auditMark is the number of completed requests in the audit log so far:
// a cost counts what comes after it.
func (c *cluster) auditMark() int {
	c.t.Helper()
	events, err := apiservertest.ReadAudit(c.srv.AuditLogPath)
	if err != nil {
		c.t.Fatal(err)
	}
	return len(events)
}

// costSince counts the requests after mark that concern namespace ns.
func (c *cluster) costSince(mark int, ns string) apiCost {
	c.t.Helper()
	events, err := apiservertest.ReadAudit(c.srv.AuditLogPath)
	if err != nil {
		c.t.Fatal(err)
	}
	cost := apiCost{byKind: map[string]int{}}
	var start time.Time
	for _, e := range events[mark:] {
		if e.Verb == "watch" {
			continue
		}
		who := ""
		switch {
		case e.User.Username == controllerUser:
			who = "controller"
			cost.controller++
		case strings.HasPrefix(e.User.Username, "system:node:") && e.Namespace() == ns:
			who = "kubelet"
			cost.kubelet++
		case e.User.Username == agentUser:
			who = "agent"
			cost.agent++
		default:
			continue
		}
		if e.Resource() == "events" && e.Namespace() == ns && (e.Verb == "create" || e.Verb == "patch") {
			cost.events++
		}
		cost.byKind[who+" "+e.Verb+" "+e.Resource()]++
		at, err := time.Parse(time.RFC3339Nano, e.RequestReceivedTimestamp)
		if err != nil {
			c.t.Fatalf("audit event of %s: %v", e.RequestURI, err)
		}
		if start.IsZero() {
			start = at
		}
		if who == "controller" && e.Verb != "get" && e.Verb != "list" {
			name, code := "", 0
			if e.ObjectRef != nil {
				name = e.ObjectRef.Name
			}
			if e.ResponseStatus != nil {
				code = e.ResponseStatus.Code
			}
			cost.writes = append(cost.writes, fmt.Sprintf("+%.1fs %s %s %s %d", at.Sub(start).Seconds(), e.Verb, e.Resource(), name, code))
		}
	}
	return cost
}

// perPair formats the cost per (node, image) pair.
func (a apiCost) perPair(pairs int) string {
	f := func(n int) float64 { return float64(n) / float64(pairs) }
	var kinds []string
	for k, n := range a.byKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("per (node, image) over %d: controller+kubelets %.1f requests (controller %.1f, kubelets %.1f), agents %.1f, Events %.1f; %s; controller writes: %s",
		pairs, f(a.controller+a.kubelet), f(a.controller), f(a.kubelet), f(a.agent), f(a.events), strings.Join(kinds, ", "), strings.Join(a.writes, ", "))
}

// noPrepullPods reports whether namespace ns has no pre-pull pod left.
func (c *cluster) noPrepullPods(ns string) bool {
	pods, err := c.admin.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=pullrecords-controller"})
	return err == nil && len(pods.Items) == 0
}

package controller

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pullrecords/pullrecords/cluster/api"
)

var podsResource = schema.GroupResource{Resource: "pods"}

func forbidden(msg string) error {
	return apierrors.NewForbidden(podsResource, "p", errors.New(msg))
}

// Each final refusal is named after its rule; every transient error stays
// an error to retry, even when it says "forbidden".
func TestPodRefusal(t *testing.T) {
	terminating := forbidden("unable to create new content in namespace ns because it is being terminated").(*apierrors.StatusError)
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "ns"}}
	cases := []struct {
		name   string
		err    error
		reason string // "" = not a refusal
	}{
		{"pod security", forbidden(`violates PodSecurity "restricted:latest": seccompProfile (pod or container "prepull" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`), ReasonPodSecurityRefused},
		{"quota exceeded", forbidden("exceeded quota: q, requested: limits.cpu=50m, used: limits.cpu=1, limited: limits.cpu=1"), ReasonQuotaRefused},
		{"quota requires limits", forbidden("failed quota: q: must specify limits.cpu for: prepull"), ReasonQuotaRefused},
		{"quota does not cover", forbidden("insufficient quota to consume: limits.cpu"), ReasonQuotaRefused},
		{"policy", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Invalid(field.NewPath(""), "", "ValidatingAdmissionPolicy 'deny' with binding 'deny' denied request: exceeded quota of fun")}), ReasonAdmissionPolicyDenied},
		{"policy, forbidden", forbidden("ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no"), ReasonAdmissionPolicyDenied},
		{"webhook", apierrors.NewBadRequest(`admission webhook "w.example" denied the request: violates PodSecurity says the webhook`), ReasonAdmissionWebhookDenied},
		{"authorization", forbidden(`User "x" cannot create resource "pods"`), ReasonPodRefused},
		{"wrapped", fmt.Errorf("creating pre-pull pod: %w", forbidden("exceeded quota: q")), ReasonQuotaRefused},
		{"quota not yet computed", forbidden("status unknown for quota: q, resources: limits.cpu"), ""},
		{"namespace terminating", terminating, ""},
		{"conflict", apierrors.NewConflict(podsResource, "p", errors.New("exceeded quota: q")), ""},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), ""},
		{"timeout", apierrors.NewTimeoutError("violates PodSecurity", 1), ""},
		{"server timeout", apierrors.NewServerTimeout(podsResource, "create", 1), ""},
		{"internal", apierrors.NewInternalError(errors.New("resource quota evaluation timed out")), ""},
		{"unavailable", apierrors.NewServiceUnavailable("webhook down"), ""},
		{"no namespace", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), ""},
		{"not an API error", errors.New("dial tcp: connection refused"), ""},
		{"nil", nil, ""},
	}
	for _, tc := range cases {
		r, ok := podRefusal(tc.err)
		switch {
		case tc.reason == "" && ok:
			t.Errorf("%s: a refusal %+v, want a retry", tc.name, r)
		case tc.reason != "" && (!ok || r.reason != tc.reason):
			t.Errorf("%s: got %+v, %v; want reason %s", tc.name, r, ok, tc.reason)
		}
	}
	// Only a quota at its limit may be freed by pods finishing.
	for msg, want := range map[string]bool{
		"exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1": true,
		"failed quota: q: must specify limits.cpu for: prepull":               false,
		"violates PodSecurity \"restricted:latest\": exceeded quota":          false,
	} {
		if r, _ := podRefusal(forbidden(msg)); r.exceeded != want {
			t.Errorf("%q: exceeded = %v, want %v", msg, r.exceeded, want)
		}
	}
	// The message is the API server's, whole, wrapped or not.
	wrapped := fmt.Errorf("creating pre-pull pod: %w", forbidden("exceeded quota: q"))
	if r, _ := podRefusal(wrapped); r.message != `pods "p" is forbidden: exceeded quota: q` {
		t.Errorf("message %q, want the API server's", r.message)
	}
}

// One event per cache, action and reason: a new batch or a new cache of
// the same name starts afresh.
func TestRefusedEventsOncePerActionAndReason(t *testing.T) {
	var e refusedEvents
	ic := &api.ImageCache{}
	ic.Namespace, ic.Name, ic.UID, ic.Status.Batch = "ns", "c", "u1", "1-a"
	steps := []struct {
		uid, batch, reason string
		want               bool
	}{
		{"u1", "1-a", ReasonQuotaRefused, true},
		{"u1", "1-a", ReasonQuotaRefused, false},
		{"u1", "1-a", ReasonPodSecurityRefused, true},
		{"u1", "1-a", ReasonQuotaRefused, false},
		{"u1", "2-b", ReasonQuotaRefused, true},
		{"u1", "2-b", ReasonQuotaRefused, false},
		{"u2", "2-b", ReasonQuotaRefused, true},
	}
	for i, s := range steps {
		ic.UID, ic.Status.Batch = types.UID(s.uid), s.batch
		if got := e.first(ic, s.reason); got != s.want {
			t.Errorf("step %d (%s %s %s): first = %v, want %v", i, s.uid, s.batch, s.reason, got, s.want)
		}
	}
	e.forget(cacheKey(ic))
	if !e.first(ic, ReasonQuotaRefused) {
		t.Error("a forgotten cache's reason is not new again")
	}
}

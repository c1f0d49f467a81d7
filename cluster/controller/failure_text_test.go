package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/cluster/api"
)

// A refused credential names the cache's secrets and the namespace to look
// in; other failures are quoted unchanged.
func TestSecretHintNamesTheSecrets(t *testing.T) {
	ic := &api.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c"}}
	ic.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}
	refused := `failed to pull and unpack image "r.test/a:1": failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized`
	got := withSecretHint(ic, refused)
	for _, want := range []string{refused, "imagePullSecrets regcred, mirror", "namespace team-a"} {
		if !strings.Contains(got, want) {
			t.Errorf("withSecretHint = %q; want it to contain %q", got, want)
		}
	}
	notFound := `failed to resolve reference "r.test/a:1": r.test/a:1: not found`
	if got := withSecretHint(ic, notFound); got != notFound {
		t.Errorf("a missing image got a credential hint: %q", got)
	}
	ic.Spec.ImagePullSecrets = nil
	if got := withSecretHint(ic, refused); !strings.Contains(got, "names no imagePullSecrets") {
		t.Errorf("without secrets: %q; want it to say the cache names none", got)
	}
}

// An empty image list and selectors matching no node are told apart.
func TestNoRequestsMessageSaysWhy(t *testing.T) {
	ic := &api.ImageCache{}
	ic.Spec.CacheSpec = []api.CacheSpecImages{{Images: []string{" "}}}
	if got := noRequestsMessage(ic); !strings.Contains(got, "lists no images") {
		t.Errorf("empty list: %q", got)
	}
	ic.Spec.CacheSpec = []api.CacheSpecImages{{Images: []string{"busybox:1.36"}, NodeSelector: map[string]string{"pool": "none"}}}
	if got := noRequestsMessage(ic); !strings.Contains(got, "No node matched") {
		t.Errorf("no node matched: %q", got)
	}
}

// The merge patch that drops the action's annotations sets each to null
// and nothing else, whatever characters a name holds.
func TestDropAnnotationsPatch(t *testing.T) {
	got, err := dropAnnotationsPatch([]string{"kubefledged.io/refresh-imagecache", `odd"name`})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"annotations":{"kubefledged.io/refresh-imagecache":null,"odd\"name":null}}}`
	if string(got) != want {
		t.Errorf("patch %s, want %s", got, want)
	}
}

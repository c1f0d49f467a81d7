package kubeletadapter_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/kubeletadapter"
)

func TestRecordRoundTrip(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
	for name, rec := range map[string]*accessor.ImagePulledRecord{
		"nil mapping":   {ImageRef: "sha256:a", LastUpdatedTime: at},
		"empty mapping": {ImageRef: "sha256:a", LastUpdatedTime: at, CredentialMapping: map[string]accessor.ImagePullCredentials{}},
		"full": {ImageRef: "sha256:b", LastUpdatedTime: at, CredentialMapping: map[string]accessor.ImagePullCredentials{
			"registry.example/a": {
				KubernetesSecrets:         []accessor.ImagePullSecret{{UID: "u", Namespace: "n", Name: "s", CredentialHash: "h"}},
				KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{{UID: "su", Namespace: "n", Name: "sa"}},
			},
			"busybox":     {NodePodsAccessible: true},
			"empty lists": {KubernetesSecrets: []accessor.ImagePullSecret{}, KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{}},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			k := kubeletadapter.RecordToKubelet(rec)
			if diff := cmp.Diff(rec, kubeletadapter.RecordFromKubelet(k)); diff != "" {
				t.Errorf("round trip (-in +out):\n%s", diff)
			}
			// The copy shares nothing with its input.
			for key := range k.CredentialMapping {
				k.CredentialMapping[key] = kubeletconfig.ImagePullCredentials{}
			}
			if k.CredentialMapping != nil {
				k.CredentialMapping["new"] = kubeletconfig.ImagePullCredentials{}
			}
			if _, ok := rec.CredentialMapping["new"]; ok {
				t.Error("conversion shares the mapping")
			}
		})
	}
	if kubeletadapter.RecordToKubelet(nil) != nil || kubeletadapter.RecordFromKubelet(nil) != nil ||
		kubeletadapter.CredentialsToKubelet(nil) != nil || kubeletadapter.CredentialsFromKubelet(nil) != nil ||
		kubeletadapter.ServiceAccountFromKubelet(nil) != nil || kubeletadapter.SecretsFromKubelet(nil) != nil {
		t.Error("nil does not stay nil")
	}
}

func TestCredentialsRoundTrip(t *testing.T) {
	in := &kubeletconfig.ImagePullCredentials{
		KubernetesSecrets:         []kubeletconfig.ImagePullSecret{{UID: "u", Namespace: "n", Name: "s", CredentialHash: "h"}},
		KubernetesServiceAccounts: []kubeletconfig.ImagePullServiceAccount{{UID: "su", Namespace: "n", Name: "sa"}},
		NodePodsAccessible:        true,
	}
	if diff := cmp.Diff(in, kubeletadapter.CredentialsToKubelet(kubeletadapter.CredentialsFromKubelet(in))); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
}

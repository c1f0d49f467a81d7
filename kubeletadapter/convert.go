package kubeletadapter

import (
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"

	"github.com/pullrecords/pullrecords/accessor"
)

// The conversions keep nil and empty apart (a nil slice stays nil, an empty
// one stays empty) and share no slice or map with their input, so a caller
// may change either side afterwards.

// CredentialsFromKubelet converts the kubelet's internal credentials to
// this library's. nil stays nil.
func CredentialsFromKubelet(in *kubeletconfig.ImagePullCredentials) *accessor.ImagePullCredentials {
	if in == nil {
		return nil
	}
	out := credsFromKubelet(*in)
	return &out
}

// CredentialsToKubelet converts this library's credentials to the kubelet's
// internal type. nil stays nil.
func CredentialsToKubelet(in *accessor.ImagePullCredentials) *kubeletconfig.ImagePullCredentials {
	if in == nil {
		return nil
	}
	out := credsToKubelet(*in)
	return &out
}

func credsFromKubelet(in kubeletconfig.ImagePullCredentials) accessor.ImagePullCredentials {
	return accessor.ImagePullCredentials{
		KubernetesSecrets:         SecretsFromKubelet(in.KubernetesSecrets),
		KubernetesServiceAccounts: serviceAccountsFromKubelet(in.KubernetesServiceAccounts),
		NodePodsAccessible:        in.NodePodsAccessible,
	}
}

func credsToKubelet(in accessor.ImagePullCredentials) kubeletconfig.ImagePullCredentials {
	return kubeletconfig.ImagePullCredentials{
		KubernetesSecrets:         secretsToKubelet(in.KubernetesSecrets),
		KubernetesServiceAccounts: serviceAccountsToKubelet(in.KubernetesServiceAccounts),
		NodePodsAccessible:        in.NodePodsAccessible,
	}
}

// SecretsFromKubelet converts a list of secret coordinates.
func SecretsFromKubelet(in []kubeletconfig.ImagePullSecret) []accessor.ImagePullSecret {
	if in == nil {
		return nil
	}
	out := make([]accessor.ImagePullSecret, len(in))
	for i, s := range in {
		out[i] = accessor.ImagePullSecret{UID: s.UID, Namespace: s.Namespace, Name: s.Name, CredentialHash: s.CredentialHash}
	}
	return out
}

func secretsToKubelet(in []accessor.ImagePullSecret) []kubeletconfig.ImagePullSecret {
	if in == nil {
		return nil
	}
	out := make([]kubeletconfig.ImagePullSecret, len(in))
	for i, s := range in {
		out[i] = kubeletconfig.ImagePullSecret{UID: s.UID, Namespace: s.Namespace, Name: s.Name, CredentialHash: s.CredentialHash}
	}
	return out
}

// ServiceAccountFromKubelet converts one service account's coordinates. nil
// stays nil.
func ServiceAccountFromKubelet(in *kubeletconfig.ImagePullServiceAccount) *accessor.ImagePullServiceAccount {
	if in == nil {
		return nil
	}
	return &accessor.ImagePullServiceAccount{UID: in.UID, Namespace: in.Namespace, Name: in.Name}
}

func serviceAccountsFromKubelet(in []kubeletconfig.ImagePullServiceAccount) []accessor.ImagePullServiceAccount {
	if in == nil {
		return nil
	}
	out := make([]accessor.ImagePullServiceAccount, len(in))
	for i, sa := range in {
		out[i] = accessor.ImagePullServiceAccount{UID: sa.UID, Namespace: sa.Namespace, Name: sa.Name}
	}
	return out
}

func serviceAccountsToKubelet(in []accessor.ImagePullServiceAccount) []kubeletconfig.ImagePullServiceAccount {
	if in == nil {
		return nil
	}
	out := make([]kubeletconfig.ImagePullServiceAccount, len(in))
	for i, sa := range in {
		out[i] = kubeletconfig.ImagePullServiceAccount{UID: sa.UID, Namespace: sa.Namespace, Name: sa.Name}
	}
	return out
}

// RecordFromKubelet converts the kubelet's internal pulled record (its
// TypeMeta is dropped). nil stays nil.
func RecordFromKubelet(in *kubeletconfig.ImagePulledRecord) *accessor.ImagePulledRecord {
	if in == nil {
		return nil
	}
	out := &accessor.ImagePulledRecord{
		LastUpdatedTime: *in.LastUpdatedTime.DeepCopy(),
		ImageRef:        in.ImageRef,
	}
	if in.CredentialMapping != nil {
		out.CredentialMapping = make(map[string]accessor.ImagePullCredentials, len(in.CredentialMapping))
		for k, c := range in.CredentialMapping {
			out.CredentialMapping[k] = credsFromKubelet(c)
		}
	}
	return out
}

// RecordToKubelet converts a pulled record to the kubelet's internal type,
// with an empty TypeMeta as the kubelet's own code keeps it. nil stays nil.
func RecordToKubelet(in *accessor.ImagePulledRecord) *kubeletconfig.ImagePulledRecord {
	if in == nil {
		return nil
	}
	out := &kubeletconfig.ImagePulledRecord{
		LastUpdatedTime: *in.LastUpdatedTime.DeepCopy(),
		ImageRef:        in.ImageRef,
	}
	if in.CredentialMapping != nil {
		out.CredentialMapping = make(map[string]kubeletconfig.ImagePullCredentials, len(in.CredentialMapping))
		for k, c := range in.CredentialMapping {
			out.CredentialMapping[k] = credsToKubelet(c)
		}
	}
	return out
}

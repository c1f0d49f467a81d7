package wire

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of pull records.
const Group = "kubelet.config.k8s.io"

// Versions of the wire format.
const (
	V1alpha1 = "v1alpha1"
	V1beta1  = "v1beta1"
)

// Kinds of pull records.
const (
	KindIntent = "ImagePullIntent"
	KindRecord = "ImagePulledRecord"
)

// ImagePullIntent is the wire form of an intent.
type ImagePullIntent struct {
	metav1.TypeMeta `json:",inline"`
	Image           string `json:"image"`
}

// ImagePulledRecord is the wire form of a pulled record.
type ImagePulledRecord struct {
	metav1.TypeMeta   `json:",inline"`
	LastUpdatedTime   metav1.Time                     `json:"lastUpdatedTime"`
	ImageRef          string                          `json:"imageRef"`
	CredentialMapping map[string]ImagePullCredentials `json:"credentialMapping,omitempty"`
}

// ImagePullCredentials is the wire form of one mapping entry.
type ImagePullCredentials struct {
	KubernetesSecrets         []ImagePullSecret         `json:"kubernetesSecrets,omitempty"`
	KubernetesServiceAccounts []ImagePullServiceAccount `json:"kubernetesServiceAccounts,omitempty"`
	NodePodsAccessible        bool                      `json:"nodePodsAccessible,omitempty"`
}

// ImagePullSecret is the wire form of a secret coordinate.
type ImagePullSecret struct {
	UID            string `json:"uid"`
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	CredentialHash string `json:"credentialHash"`
}

// ImagePullServiceAccount is the wire form of a service account coordinate.
type ImagePullServiceAccount struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// DeepCopyObject implements runtime.Object. Wire values are built and thrown
// away by the codec and never shared, so a shallow copy of the top level is
// enough for the scheme's needs; slices and maps are copied as well anyway.
func (in *ImagePullIntent) DeepCopyObject() runtime.Object {
	out := *in
	return &out
}

// DeepCopyObject implements runtime.Object.
func (in *ImagePulledRecord) DeepCopyObject() runtime.Object {
	out := *in
	out.LastUpdatedTime = *in.LastUpdatedTime.DeepCopy()
	if in.CredentialMapping != nil {
		out.CredentialMapping = make(map[string]ImagePullCredentials, len(in.CredentialMapping))
		for k, v := range in.CredentialMapping {
			v.KubernetesSecrets = append([]ImagePullSecret(nil), v.KubernetesSecrets...)
			v.KubernetesServiceAccounts = append([]ImagePullServiceAccount(nil), v.KubernetesServiceAccounts...)
			out.CredentialMapping[k] = v
		}
	}
	return &out
}

// NewScheme returns a scheme with both kinds registered under both versions.
func NewScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, version := range []string{V1alpha1, V1beta1} {
		gv := schema.GroupVersion{Group: Group, Version: version}
		scheme.AddKnownTypeWithName(gv.WithKind(KindIntent), &ImagePullIntent{})
		scheme.AddKnownTypeWithName(gv.WithKind(KindRecord), &ImagePulledRecord{})
	}
	return scheme
}

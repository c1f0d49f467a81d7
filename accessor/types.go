package accessor

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImagePullIntent records that a pull of Image (the pod container's image
// string, verbatim) is in flight.
type ImagePullIntent struct {
	Image string
}

// ImagePulledRecord records which credentials pulled the content named by
// ImageRef.
type ImagePulledRecord struct {
	// LastUpdatedTime is when the credential mapping last changed. Stores keep
	// it at whole-second precision, as it is on disk.
	LastUpdatedTime metav1.Time
	// ImageRef is the record's key: the image ID reported by the runtime.
	ImageRef string
	// CredentialMapping maps a mapping key to the credentials that pulled
	// ImageRef under it. The kubelet's key, and pullmanager's by default, is
	// the pod's image string with only its tag and digest cut, not
	// normalised: "busybox" and "docker.io/library/busybox" are two keys.
	CredentialMapping map[string]ImagePullCredentials
}

// ImagePullCredentials are the credentials that pulled an image under one name.
type ImagePullCredentials struct {
	KubernetesSecrets         []ImagePullSecret
	KubernetesServiceAccounts []ImagePullServiceAccount
	// NodePodsAccessible means the image was pulled with node credentials or
	// anonymously, so every pod on the node may use it.
	NodePodsAccessible bool
}

// ImagePullSecret names a Kubernetes secret and the hash of the credential it
// held when it was used.
type ImagePullSecret struct {
	UID            string
	Namespace      string
	Name           string
	CredentialHash string
}

// ImagePullServiceAccount names a Kubernetes service account whose token was
// exchanged for registry credentials.
type ImagePullServiceAccount struct {
	UID       string
	Namespace string
	Name      string
}

// DeepCopy returns a copy of the intent that shares no memory with it.
func (in *ImagePullIntent) DeepCopy() *ImagePullIntent {
	if in == nil {
		return nil
	}
	out := *in
	return &out
}

// DeepCopy returns a copy of the record that shares no memory with it.
func (r *ImagePulledRecord) DeepCopy() *ImagePulledRecord {
	if r == nil {
		return nil
	}
	out := &ImagePulledRecord{
		LastUpdatedTime: *r.LastUpdatedTime.DeepCopy(),
		ImageRef:        r.ImageRef,
	}
	if r.CredentialMapping != nil {
		out.CredentialMapping = make(map[string]ImagePullCredentials, len(r.CredentialMapping))
		for name, creds := range r.CredentialMapping {
			out.CredentialMapping[name] = creds.DeepCopy()
		}
	}
	return out
}

// DeepCopy returns a copy of the credentials that shares no memory with them.
func (c ImagePullCredentials) DeepCopy() ImagePullCredentials {
	out := ImagePullCredentials{NodePodsAccessible: c.NodePodsAccessible}
	if c.KubernetesSecrets != nil {
		out.KubernetesSecrets = append([]ImagePullSecret(nil), c.KubernetesSecrets...)
	}
	if c.KubernetesServiceAccounts != nil {
		out.KubernetesServiceAccounts = append([]ImagePullServiceAccount(nil), c.KubernetesServiceAccounts...)
	}
	return out
}

// StorageTime returns t as stores keep it: UTC, whole seconds. A record read
// back from any store has its LastUpdatedTime in this form, so the in-memory
// and on-disk views of a record always compare the same against a prune
// deadline (upstream keeps full precision in memory only).
func StorageTime(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t.UTC().Truncate(time.Second))
}

// ForStorage returns a deep copy of r with its time in storage form.
func (r *ImagePulledRecord) ForStorage() *ImagePulledRecord {
	out := r.DeepCopy()
	out.LastUpdatedTime = StorageTime(r.LastUpdatedTime.Time)
	return out
}

package accessor_test

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/accessor"
)

// Encode a pulled record in the kubelet's byte form and decode it back.
func Example_encodeDecode() {
	rec := &accessor.ImagePulledRecord{
		// Stored in whole seconds, UTC.
		LastUpdatedTime: metav1.NewTime(time.Date(2025, 3, 1, 9, 30, 0, 250_000_000, time.UTC)),
		ImageRef:        "sha256:1234",
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			"registry.example.com/team/app": {
				KubernetesSecrets: []accessor.ImagePullSecret{{UID: "uid-1", Namespace: "team", Name: "pull", CredentialHash: "h"}},
			},
		},
	}
	data, err := accessor.EncodePulledRecord(rec)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(data))

	dec, err := accessor.Decode(data)
	if err != nil {
		panic(err)
	}
	got := dec.Record
	fmt.Println(dec.Version, got.ImageRef, got.LastUpdatedTime.UTC().Format(time.RFC3339Nano))
	fmt.Println(got.CredentialMapping["registry.example.com/team/app"].KubernetesSecrets[0].Name)

	// v1alpha1 files, as older kubelets wrote them, decode too.
	d, err := accessor.Decode([]byte(`{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1alpha1","image":"nginx"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Kind, d.Version, d.Key())
	// Output:
	// {"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"2025-03-01T09:30:00Z","imageRef":"sha256:1234","credentialMapping":{"registry.example.com/team/app":{"kubernetesSecrets":[{"uid":"uid-1","namespace":"team","name":"pull","credentialHash":"h"}]}}}
	// v1beta1 sha256:1234 2025-03-01T09:30:00Z
	// pull
	// ImagePullIntent v1alpha1 nginx
}

package accessor_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/accessor"
)

func benchRecord() *accessor.ImagePulledRecord {
	return &accessor.ImagePulledRecord{
		LastUpdatedTime: metav1.NewTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)),
		ImageRef:        "sha256:4f1c7d2e0a9b8c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d",
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			"registry.example.com/team-a/api": {KubernetesSecrets: []accessor.ImagePullSecret{
				{UID: "6a1f0c2e-1111-4a4a-9b9b-000000000001", Namespace: "team-a", Name: "regcred", CredentialHash: "0f3e1a6c9d2b4e7f8a1c3d5e7f9a0b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a"},
				{UID: "6a1f0c2e-1111-4a4a-9b9b-000000000002", Namespace: "team-b", Name: "regcred", CredentialHash: "1f3e1a6c9d2b4e7f8a1c3d5e7f9a0b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a"},
			}},
			"docker.io/library/nginx": {NodePodsAccessible: true},
		},
	}
}

func BenchmarkDecodePulledRecord(b *testing.B) {
	data, err := accessor.EncodePulledRecord(benchRecord())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := accessor.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeIntent(b *testing.B) {
	data, err := accessor.EncodeIntent(&accessor.ImagePullIntent{Image: "registry.example.com/team-a/api:1.4"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := accessor.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodePulledRecord(b *testing.B) {
	rec := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := accessor.EncodePulledRecord(rec); err != nil {
			b.Fatal(err)
		}
	}
}

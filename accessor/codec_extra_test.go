package accessor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

// A time in range with its zone offset but out of range in UTC must not
// decode: re-encoding it would give a year no decoder accepts.
func TestDecodeRejectsTimeOutsideUTCRange(t *testing.T) {
	for _, ts := range []string{"9999-12-31T23:59:59-01:00", "0000-01-01T00:30:00+01:00"} {
		data := []byte(`{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"` + ts + `","imageRef":"r"}`)
		if _, err := accessor.Decode(data); !errors.Is(err, accessor.ErrMalformed) {
			t.Errorf("Decode with time %s: err = %v, want ErrMalformed", ts, err)
		}
	}
	rec := &accessor.ImagePulledRecord{ImageRef: "r", LastUpdatedTime: metav1.NewTime(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}
	if _, err := accessor.EncodePulledRecord(rec); !errors.Is(err, accessor.ErrTimeOutOfRange) {
		t.Errorf("EncodePulledRecord of year 10000: err = %v, want ErrTimeOutOfRange", err)
	}
}

// Files not in the kubelet's own key order take the serializer's path and
// must decode to the same values as the fast path.
func TestDecodeFastAndSlowPathsAgree(t *testing.T) {
	fast, err := accessor.EncodePulledRecord(benchRecord())
	if err != nil {
		t.Fatal(err)
	}
	// Same object, apiVersion before kind and with spaces: not a fast-path prefix.
	slow := []byte(`{ "apiVersion":"kubelet.config.k8s.io/v1beta1", "kind":"ImagePulledRecord"` + string(fast[len(`{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1"`):]))
	a, err := accessor.Decode(fast)
	if err != nil {
		t.Fatal(err)
	}
	b, err := accessor.Decode(slow)
	if err != nil {
		t.Fatalf("slow path: %v (%s)", err, slow)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("fast and slow decode differ (-fast +slow):\n%s", diff)
	}
	for _, bad := range []string{
		`{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"x","kind":"ImagePulledRecord"}`,
		`{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"x","apiVersion":"kubelet.config.k8s.io/v1alpha1"}`,
		`{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"x","imageRef":"y"}`,
		`{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"x"} {}`,
	} {
		if _, err := accessor.Decode([]byte(bad)); !errors.Is(err, accessor.ErrMalformed) {
			t.Errorf("Decode(%s) = %v, want ErrMalformed", bad, err)
		}
	}
}

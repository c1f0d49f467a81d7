package accessor_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/accessor"
)

const (
	beta  = `"apiVersion":"kubelet.config.k8s.io/v1beta1"`
	alpha = `"apiVersion":"kubelet.config.k8s.io/v1alpha1"`
)

// decodeRecord decodes data with accessor.Decode and returns its pulled
// record, failing unless data is one.
func decodeRecord(data []byte) (*accessor.ImagePulledRecord, string, error) {
	d, err := accessor.Decode(data)
	if err != nil {
		return nil, "", err
	}
	if d.Record == nil {
		return nil, "", fmt.Errorf("decoded a %s, want a %s", d.Kind, accessor.KindImagePulledRecord)
	}
	return d.Record, d.Version, nil
}

// decodeIntent decodes data with accessor.Decode and returns its intent,
// failing unless data is one.
func decodeIntent(data []byte) (*accessor.ImagePullIntent, string, error) {
	d, err := accessor.Decode(data)
	if err != nil {
		return nil, "", err
	}
	if d.Intent == nil {
		return nil, "", fmt.Errorf("decoded a %s, want a %s", d.Kind, accessor.KindImagePullIntent)
	}
	return d.Intent, d.Version, nil
}

func fullRecord() *accessor.ImagePulledRecord {
	return &accessor.ImagePulledRecord{
		LastUpdatedTime: metav1.NewTime(time.Date(2024, 10, 21, 12, 26, 40, 0, time.UTC)),
		ImageRef:        "sha256:" + strings.Repeat("ab", 32),
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			"docker.io/library/nginx": {NodePodsAccessible: true},
			"ghcr.io/acme/api": {
				KubernetesSecrets: []accessor.ImagePullSecret{
					{UID: "u1", Namespace: "ns", Name: "s1", CredentialHash: "h1"},
					{UID: "u2", Namespace: "ns", Name: "s2", CredentialHash: ""},
				},
				KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{{UID: "sa1", Namespace: "ns", Name: "default"}},
			},
		},
	}
}

func TestEncodeBytes(t *testing.T) {
	tests := []struct {
		name string
		enc  func() ([]byte, error)
		want string
	}{
		{
			name: "intent",
			enc: func() ([]byte, error) {
				return accessor.EncodeIntent(&accessor.ImagePullIntent{Image: "docker.io/testing/test:latest"})
			},
			want: `{"kind":"ImagePullIntent",` + beta + `,"image":"docker.io/testing/test:latest"}` + "\n",
		},
		{
			name: "record with every field, map keys sorted",
			enc:  func() ([]byte, error) { return accessor.EncodePulledRecord(fullRecord()) },
			want: `{"kind":"ImagePulledRecord",` + beta + `,"lastUpdatedTime":"2024-10-21T12:26:40Z","imageRef":"sha256:` + strings.Repeat("ab", 32) + `",` +
				`"credentialMapping":{"docker.io/library/nginx":{"nodePodsAccessible":true},` +
				`"ghcr.io/acme/api":{"kubernetesSecrets":[{"uid":"u1","namespace":"ns","name":"s1","credentialHash":"h1"},{"uid":"u2","namespace":"ns","name":"s2","credentialHash":""}],` +
				`"kubernetesServiceAccounts":[{"uid":"sa1","namespace":"ns","name":"default"}]}}}` + "\n",
		},
		{
			name: "no mapping, zero time",
			enc:  func() ([]byte, error) { return accessor.EncodePulledRecord(&accessor.ImagePulledRecord{ImageRef: "r"}) },
			want: `{"kind":"ImagePulledRecord",` + beta + `,"lastUpdatedTime":null,"imageRef":"r"}` + "\n",
		},
		{
			name: "empty mapping is omitted",
			enc: func() ([]byte, error) {
				return accessor.EncodePulledRecord(&accessor.ImagePulledRecord{ImageRef: "r", CredentialMapping: map[string]accessor.ImagePullCredentials{}})
			},
			want: `{"kind":"ImagePulledRecord",` + beta + `,"lastUpdatedTime":null,"imageRef":"r"}` + "\n",
		},
		{
			name: "sub-second and non-UTC time is written in whole-second UTC",
			enc: func() ([]byte, error) {
				zone := time.FixedZone("UTC+5", 5*3600)
				return accessor.EncodePulledRecord(&accessor.ImagePulledRecord{
					ImageRef:        "r",
					LastUpdatedTime: metav1.NewTime(time.Date(2025, 1, 2, 8, 4, 5, 999_000_000, zone)),
				})
			},
			want: `{"kind":"ImagePulledRecord",` + beta + `,"lastUpdatedTime":"2025-01-02T03:04:05Z","imageRef":"r"}` + "\n",
		},
		{
			name: "unusual characters are escaped, not dropped",
			enc:  func() ([]byte, error) { return accessor.EncodeIntent(&accessor.ImagePullIntent{Image: "a\x00b\"<c>"}) },
			want: `{"kind":"ImagePullIntent",` + beta + `,"image":"a\u0000b\"\u003cc\u003e"}` + "\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.enc()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("bytes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	records := []*accessor.ImagePulledRecord{
		fullRecord(),
		{ImageRef: "r"},
		{ImageRef: "r", LastUpdatedTime: metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))},
		{ImageRef: "r", CredentialMapping: map[string]accessor.ImagePullCredentials{"x": {}}},
		{ImageRef: "日本語/イメージ", CredentialMapping: map[string]accessor.ImagePullCredentials{"a\x00b": {NodePodsAccessible: true}}},
	}
	for i, rec := range records {
		data, err := accessor.EncodePulledRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, version, err := decodeRecord(data)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if version != accessor.VersionV1beta1 {
			t.Errorf("record %d: version %q", i, version)
		}
		if diff := cmp.Diff(rec, got); diff != "" {
			t.Errorf("record %d round trip (-want +got):\n%s", i, diff)
		}
		again, err := accessor.EncodePulledRecord(got)
		if err != nil || string(again) != string(data) {
			t.Errorf("record %d: re-encoding is not byte-stable: %q vs %q (%v)", i, again, data, err)
		}
	}
	for _, image := range []string{"nginx", "docker.io/library/nginx:latest", "registry:5000/a/b@sha256:" + strings.Repeat("0", 64), "a\x00b"} {
		data, err := accessor.EncodeIntent(&accessor.ImagePullIntent{Image: image})
		if err != nil {
			t.Fatal(err)
		}
		got, version, err := decodeIntent(data)
		if err != nil || version != accessor.VersionV1beta1 || got.Image != image {
			t.Errorf("intent %q: %+v, %q, %v", image, got, version, err)
		}
	}
}

func TestDecodeV1alpha1(t *testing.T) {
	data, err := accessor.EncodePulledRecord(fullRecord())
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(data), beta, alpha, 1)
	got, version, err := decodeRecord([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if version != accessor.VersionV1alpha1 {
		t.Errorf("version %q, want v1alpha1", version)
	}
	if diff := cmp.Diff(fullRecord(), got); diff != "" {
		t.Errorf("v1alpha1 decode (-want +got):\n%s", diff)
	}
}

func TestDecodeTimes(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2024-10-21T12:26:40Z", time.Date(2024, 10, 21, 12, 26, 40, 0, time.UTC)},
		{"2024-10-21T14:26:40+02:00", time.Date(2024, 10, 21, 12, 26, 40, 0, time.UTC)},
	}
	for _, tc := range tests {
		data := `{"kind":"ImagePulledRecord",` + beta + `,"lastUpdatedTime":"` + tc.in + `","imageRef":"r"}`
		got, _, err := decodeRecord([]byte(data))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if !got.LastUpdatedTime.Time.Equal(tc.want) || got.LastUpdatedTime.Location() != time.UTC {
			t.Errorf("%s decoded to %v, want %v in UTC", tc.in, got.LastUpdatedTime, tc.want)
		}
	}
}

func TestStorageTime(t *testing.T) {
	zone := time.FixedZone("X", -7*3600)
	in := time.Date(2025, 5, 6, 1, 2, 3, 456789, zone)
	got := accessor.StorageTime(in)
	want := time.Date(2025, 5, 6, 8, 2, 3, 0, time.UTC)
	if !got.Time.Equal(want) || got.Location() != time.UTC || got.Nanosecond() != 0 {
		t.Errorf("StorageTime = %v, want %v", got, want)
	}
	if st := accessor.StorageTime(time.Time{}); !st.IsZero() {
		t.Error("StorageTime of the zero time is not zero")
	}
	rec := fullRecord()
	rec.LastUpdatedTime = metav1.NewTime(in)
	st := rec.ForStorage()
	if !st.LastUpdatedTime.Time.Equal(want) || rec.LastUpdatedTime.Nanosecond() == 0 {
		t.Errorf("ForStorage = %v (original %v)", st.LastUpdatedTime, rec.LastUpdatedTime)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := `{"kind":"ImagePulledRecord",` + beta + `,"lastUpdatedTime":"2024-10-21T12:26:40Z","imageRef":"r"}`
	tests := map[string]string{
		"empty":             ``,
		"null":              `null`,
		"array":             `[]`,
		"truncated":         good[:len(good)-5],
		"unknown field":     strings.Replace(good, `"imageRef"`, `"extra":1,"imageRef"`, 1),
		"duplicate field":   strings.Replace(good, `"imageRef":"r"`, `"imageRef":"r","imageRef":"s"`, 1),
		"case-folded field": strings.Replace(good, `"imageRef"`, `"ImageRef"`, 1),
		"unknown kind":      strings.Replace(good, `ImagePulledRecord`, `Pod`, 1),
		"no kind":           strings.Replace(good, `"kind":"ImagePulledRecord",`, ``, 1),
		"unknown version":   strings.Replace(good, `v1beta1`, `v1`, 1),
		"other group":       strings.Replace(good, `kubelet.config.k8s.io`, `imagemanager.kubelet.config.k8s.io`, 1),
		"old secrets field": `{"kind":"ImagePulledRecord",` + alpha + `,"lastUpdatedTime":null,"imageRef":"r","credentialMapping":{"x":{"kubernetesSecretCoordinates":[]}}}`,
		"wrong type":        strings.Replace(good, `"imageRef":"r"`, `"imageRef":5`, 1),
		"bad time":          strings.Replace(good, `2024-10-21T12:26:40Z`, `yesterday`, 1),
		"trailing garbage":  good + `}`,
		"zeros":             strings.Repeat("\x00", 64),
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := accessor.Decode([]byte(in))
			if !errors.Is(err, accessor.ErrMalformed) {
				t.Errorf("Decode(%q) = %v, want ErrMalformed", in, err)
			}
		})
	}
}

func TestDecodeWrongKind(t *testing.T) {
	intent, err := accessor.EncodeIntent(&accessor.ImagePullIntent{Image: "x"})
	if err != nil {
		t.Fatal(err)
	}
	record, err := accessor.EncodePulledRecord(&accessor.ImagePulledRecord{ImageRef: "x"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := accessor.Decode(intent)
	if err != nil || d.Kind != accessor.KindImagePullIntent || d.Key() != "x" || d.Record != nil {
		t.Errorf("Decode(intent) = %+v, %v", d, err)
	}
	d, err = accessor.Decode(record)
	if err != nil || d.Kind != accessor.KindImagePulledRecord || d.Key() != "x" || d.Intent != nil {
		t.Errorf("Decode(record) = %+v, %v", d, err)
	}
	if _, _, err := decodeRecord(intent); err == nil {
		t.Error("decodeRecord(intent) succeeded")
	}
	if _, _, err := decodeIntent(record); err == nil {
		t.Error("decodeIntent(record) succeeded")
	}
}

func TestEncodeNil(t *testing.T) {
	if _, err := accessor.EncodePulledRecord(nil); !errors.Is(err, accessor.ErrNilRecord) {
		t.Errorf("EncodePulledRecord(nil) = %v", err)
	}
	if _, err := accessor.EncodeIntent(nil); !errors.Is(err, accessor.ErrNilRecord) {
		t.Errorf("EncodeIntent(nil) = %v", err)
	}
}

func TestDeepCopyShares(t *testing.T) {
	rec := fullRecord()
	cp := rec.DeepCopy()
	if diff := cmp.Diff(rec, cp); diff != "" {
		t.Fatalf("copy differs (-orig +copy):\n%s", diff)
	}
	c := cp.CredentialMapping["ghcr.io/acme/api"]
	c.KubernetesSecrets[0].Name = "changed"
	c.KubernetesServiceAccounts[0].Name = "changed"
	cp.CredentialMapping["new"] = accessor.ImagePullCredentials{}
	if diff := cmp.Diff(fullRecord(), rec); diff != "" {
		t.Errorf("changing the copy changed the original (-want +got):\n%s", diff)
	}
	if (*accessor.ImagePulledRecord)(nil).DeepCopy() != nil || (*accessor.ImagePullIntent)(nil).DeepCopy() != nil {
		t.Error("DeepCopy of nil is not nil")
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

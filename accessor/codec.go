package accessor

import (
	"bytes"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	kjson "sigs.k8s.io/json"

	"github.com/pullrecords/pullrecords/accessor/internal/wire"
)

// The group, versions and kinds of the on-disk format.
const (
	APIGroup        = wire.Group
	VersionV1alpha1 = wire.V1alpha1
	VersionV1beta1  = wire.V1beta1
	// CurrentVersion is the version every encoder here writes, as the kubelet
	// has since kubernetes#132579.
	CurrentVersion = wire.V1beta1

	KindImagePullIntent   = wire.KindIntent
	KindImagePulledRecord = wire.KindRecord
)

// The serializer is apimachinery's JSON serializer in strict mode over a
// private scheme, the same set-up the kubelet's file store uses, so the bytes
// and the strictness are the same.
var serializer = func() *json.Serializer {
	scheme := wire.NewScheme()
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Strict: true})
}()

// Decoded is one decoded record file.
type Decoded struct {
	Kind    string // KindImagePullIntent or KindImagePulledRecord
	Version string // VersionV1alpha1 or VersionV1beta1
	Intent  *ImagePullIntent
	Record  *ImagePulledRecord
}

// Key returns the decoded object's key: the intent's image or the record's imageRef.
func (d Decoded) Key() string {
	if d.Intent != nil {
		return d.Intent.Image
	}
	if d.Record != nil {
		return d.Record.ImageRef
	}
	return ""
}

// Decode decodes an intent or a pulled record in any supported version.
// Every failure matches ErrMalformed.
func Decode(data []byte) (Decoded, error) {
	if d, ok := decodeCanonical(data); ok {
		return d, nil
	}
	obj, version, err := decodeObject(data)
	if err != nil {
		return Decoded{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return decodedFromWire(obj, version)
}

// decodedFromWire converts a decoded wire object. Every failure matches
// ErrMalformed.
func decodedFromWire(obj runtime.Object, version string) (Decoded, error) {
	switch o := obj.(type) {
	case *wire.ImagePullIntent:
		return Decoded{Kind: KindImagePullIntent, Version: version, Intent: &ImagePullIntent{Image: o.Image}}, nil
	case *wire.ImagePulledRecord:
		if err := checkStorableTime(o.LastUpdatedTime); err != nil {
			return Decoded{}, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		return Decoded{Kind: KindImagePulledRecord, Version: version, Record: recordFromWire(o)}, nil
	default:
		return Decoded{}, fmt.Errorf("%w: unexpected object %T", ErrMalformed, obj)
	}
}

// fastPath is a file that starts exactly as the kubelet writes it, so its kind
// and version are known before decoding.
type fastPath struct {
	prefix  []byte
	version string
	kind    string
	newObj  func() runtime.Object
}

var fastPaths = func() []fastPath {
	var out []fastPath
	for _, version := range []string{wire.V1beta1, wire.V1alpha1} {
		for _, kind := range []string{wire.KindRecord, wire.KindIntent} {
			fp := fastPath{
				prefix:  []byte(`{"kind":"` + kind + `","apiVersion":"` + APIGroup + "/" + version + `",`),
				version: version,
				kind:    kind,
				newObj:  func() runtime.Object { return &wire.ImagePulledRecord{} },
			}
			if kind == wire.KindIntent {
				fp.newObj = func() runtime.Object { return &wire.ImagePullIntent{} }
			}
			out = append(out, fp)
		}
	}
	return out
}()

// decodeObject decodes data strictly into the wire type of its kind. Files in
// the kubelet's own byte layout take a fast path: their kind and version are
// read off the fixed prefix, and the bytes are decoded once, strictly, into
// that type, exactly what apimachinery's serializer does after its separate
// pass to find the kind. Anything else (other key order, whitespace, unknown
// kinds) goes through the serializer itself.
func decodeObject(data []byte) (runtime.Object, string, error) {
	for _, fp := range fastPaths {
		if !bytes.HasPrefix(data, fp.prefix) {
			continue
		}
		obj := fp.newObj()
		strictErrs, err := kjson.UnmarshalStrict(data, obj)
		if err != nil {
			return nil, "", err
		}
		if len(strictErrs) > 0 {
			return nil, "", runtime.NewStrictDecodingError(strictErrs)
		}
		// Duplicate keys are strict errors above, so the decoded type
		// meta is the prefix's; check anyway rather than assume.
		gvk := obj.GetObjectKind().GroupVersionKind()
		if gvk.Group != APIGroup || gvk.Version != fp.version || gvk.Kind != fp.kind {
			return nil, "", fmt.Errorf("type meta %v does not match the file's prefix", gvk)
		}
		return obj, fp.version, nil
	}
	obj, gvk, err := serializer.Decode(data, nil, nil)
	if err != nil {
		return nil, "", err
	}
	if gvk.Group != APIGroup {
		return nil, "", fmt.Errorf("unexpected group %q", gvk.Group)
	}
	return obj, gvk.Version, nil
}

// checkStorableTime rejects times that RFC 3339 cannot carry once converted
// to UTC (years outside 0000-9999): such a time decodes from a file with a
// zone offset but would be re-encoded as a string no decoder accepts.
func checkStorableTime(t metav1.Time) error {
	if t.IsZero() {
		return nil
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("lastUpdatedTime %s is outside years 0000-9999 in UTC", t.Time.Format(time.RFC3339))
	}
	return nil
}

// Encode returns the v1beta1 bytes of a decoded intent or record: what a
// migration to the current version writes.
func Encode(d Decoded) ([]byte, error) {
	if d.Intent != nil {
		return EncodeIntent(d.Intent)
	}
	return EncodePulledRecord(d.Record)
}

// EncodeIntent returns the v1beta1 bytes the kubelet writes for an intent.
func EncodeIntent(intent *ImagePullIntent) ([]byte, error) {
	if intent == nil {
		return nil, ErrNilRecord
	}
	return encode(&wire.ImagePullIntent{TypeMeta: typeMeta(KindImagePullIntent), Image: intent.Image})
}

// EncodePulledRecord returns the v1beta1 bytes the kubelet writes for a record.
func EncodePulledRecord(record *ImagePulledRecord) ([]byte, error) {
	if record == nil {
		return nil, ErrNilRecord
	}
	if err := checkStorableTime(record.LastUpdatedTime); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTimeOutOfRange, err)
	}
	return encode(recordToWire(record))
}

func encode(obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(256)
	if err := serializer.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kind, APIVersion: APIGroup + "/" + CurrentVersion}
}

func recordToWire(r *ImagePulledRecord) *wire.ImagePulledRecord {
	out := &wire.ImagePulledRecord{
		TypeMeta:        typeMeta(KindImagePulledRecord),
		LastUpdatedTime: r.LastUpdatedTime,
		ImageRef:        r.ImageRef,
	}
	if r.CredentialMapping != nil {
		out.CredentialMapping = make(map[string]wire.ImagePullCredentials, len(r.CredentialMapping))
		for name, c := range r.CredentialMapping {
			wc := wire.ImagePullCredentials{NodePodsAccessible: c.NodePodsAccessible}
			if c.KubernetesSecrets != nil {
				wc.KubernetesSecrets = make([]wire.ImagePullSecret, len(c.KubernetesSecrets))
				for i, s := range c.KubernetesSecrets {
					wc.KubernetesSecrets[i] = wire.ImagePullSecret(s)
				}
			}
			if c.KubernetesServiceAccounts != nil {
				wc.KubernetesServiceAccounts = make([]wire.ImagePullServiceAccount, len(c.KubernetesServiceAccounts))
				for i, sa := range c.KubernetesServiceAccounts {
					wc.KubernetesServiceAccounts[i] = wire.ImagePullServiceAccount(sa)
				}
			}
			out.CredentialMapping[name] = wc
		}
	}
	return out
}

func recordFromWire(w *wire.ImagePulledRecord) *ImagePulledRecord {
	out := &ImagePulledRecord{
		LastUpdatedTime: w.LastUpdatedTime,
		ImageRef:        w.ImageRef,
	}
	if !out.LastUpdatedTime.IsZero() {
		out.LastUpdatedTime = metav1.NewTime(out.LastUpdatedTime.UTC())
	}
	if w.CredentialMapping != nil {
		out.CredentialMapping = make(map[string]ImagePullCredentials, len(w.CredentialMapping))
		for name, wc := range w.CredentialMapping {
			c := ImagePullCredentials{NodePodsAccessible: wc.NodePodsAccessible}
			if wc.KubernetesSecrets != nil {
				c.KubernetesSecrets = make([]ImagePullSecret, len(wc.KubernetesSecrets))
				for i, s := range wc.KubernetesSecrets {
					c.KubernetesSecrets[i] = ImagePullSecret(s)
				}
			}
			if wc.KubernetesServiceAccounts != nil {
				c.KubernetesServiceAccounts = make([]ImagePullServiceAccount, len(wc.KubernetesServiceAccounts))
				for i, sa := range wc.KubernetesServiceAccounts {
					c.KubernetesServiceAccounts[i] = ImagePullServiceAccount(sa)
				}
			}
			out.CredentialMapping[name] = c
		}
	}
	return out
}

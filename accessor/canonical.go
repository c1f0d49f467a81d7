package accessor

import (
	"bytes"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pullrecords/pullrecords/accessor/internal/wire"
)

// decodeCanonical decodes files in exactly the byte form an encoder of the
// kubelet's format writes: compact JSON, fields in struct order, optional
// fields present only when non-empty, map keys strictly ascending, times as
// whole-second UTC RFC 3339, strings without escape sequences, one trailing
// newline. That is what every file the kubelet (or this package) wrote looks
// like, so opening a node's records decodes almost every file here.
//
// It accepts a subset of what the strict serializer accepts and decodes it to
// the same value (FuzzCanonicalAgreesWithSerializer checks this). On anything
// else, including every malformed input, it returns ok == false and Decode
// falls back to the serializer, which decides and words the error.
func decodeCanonical(data []byte) (d Decoded, ok bool) {
	p := canonParser{data: data}
	for _, fp := range fastPaths {
		if !bytes.HasPrefix(data, fp.prefix) {
			continue
		}
		p.pos = len(fp.prefix)
		d.Version = fp.version
		if fp.kind == wire.KindIntent {
			d.Kind = KindImagePullIntent
			image, ok := p.field(`"image":`, true)
			if !ok || !p.end() {
				return Decoded{}, false
			}
			d.Intent = &ImagePullIntent{Image: image}
			return d, true
		}
		d.Kind = KindImagePulledRecord
		d.Record, ok = p.record()
		if !ok || !p.end() {
			return Decoded{}, false
		}
		return d, true
	}
	return Decoded{}, false
}

type canonParser struct {
	data []byte
	pos  int
	// validate makes the parser check the input without building the
	// value: strings alias data (they never outlive the call) and the
	// mapping, secrets and service accounts are not built.
	validate bool
}

// CanonicalFile is what ValidateCanonical found out about a file.
type CanonicalFile struct {
	Kind    string // KindImagePullIntent or KindImagePulledRecord
	Version string // VersionV1alpha1 or VersionV1beta1
	Key     string // the intent's image or the record's imageRef
}

// ValidateCanonical reports whether data is a file in the exact byte form an
// encoder of the kubelet's format writes (the form Decode takes its fast path
// for, which is every file the kubelet or this package wrote) and, if so,
// its kind, version and key. It checks everything Decode would but builds no
// value, so it allocates almost nothing: a store can check a file when it
// reads it and decode it later. Decode accepts every file it accepts, with
// the same kind, version and key. ok == false says nothing about whether
// Decode accepts data.
func ValidateCanonical(data []byte) (f CanonicalFile, ok bool) {
	p := canonParser{data: data, validate: true}
	for _, fp := range fastPaths {
		if !bytes.HasPrefix(data, fp.prefix) {
			continue
		}
		p.pos = len(fp.prefix)
		f.Version = fp.version
		if fp.kind == wire.KindIntent {
			image, ok := p.field(`"image":`, true)
			if !ok || !p.end() {
				return CanonicalFile{}, false
			}
			f.Kind, f.Key = KindImagePullIntent, strings.Clone(image)
			return f, true
		}
		r, ok := p.record()
		if !ok || !p.end() {
			return CanonicalFile{}, false
		}
		f.Kind, f.Key = KindImagePulledRecord, strings.Clone(r.ImageRef)
		return f, true
	}
	return CanonicalFile{}, false
}

// lit consumes s if the input continues with it.
func (p *canonParser) lit(s string) bool {
	if len(p.data)-p.pos < len(s) || string(p.data[p.pos:p.pos+len(s)]) != s {
		return false
	}
	p.pos += len(s)
	return true
}

// end accepts the closing brace and the encoder's trailing newline.
func (p *canonParser) end() bool {
	return p.lit("}\n") && p.pos == len(p.data)
}

// str consumes a JSON string without escapes or control characters and with
// valid UTF-8, the only strings whose decoding needs no interpretation.
func (p *canonParser) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	start := p.pos
	ascii := true
	for ; p.pos < len(p.data); p.pos++ {
		c := p.data[p.pos]
		switch {
		case c == '"':
			b := p.data[start:p.pos]
			p.pos++
			if !ascii && !utf8.Valid(b) {
				return "", false
			}
			if p.validate {
				// Aliases data; in validate mode no string outlives
				// the parse except through strings.Clone.
				return unsafe.String(unsafe.SliceData(b), len(b)), true
			}
			return string(b), true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// field consumes key (with its colon) and a string value, then a comma
// unless last.
func (p *canonParser) field(key string, last bool) (string, bool) {
	if !p.lit(key) {
		return "", false
	}
	v, ok := p.str()
	if !ok {
		return "", false
	}
	return v, last || p.lit(",")
}

func (p *canonParser) record() (*ImagePulledRecord, bool) {
	r := &ImagePulledRecord{}
	if !p.lit(`"lastUpdatedTime":`) {
		return nil, false
	}
	if !p.lit("null") {
		ts, ok := p.str()
		// Only the encoder's own form: 20 bytes ending in Z.
		if !ok || len(ts) != len("2006-01-02T15:04:05Z") || ts[len(ts)-1] != 'Z' {
			return nil, false
		}
		t, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			return nil, false
		}
		r.LastUpdatedTime = metav1.NewTime(t.UTC())
	}
	if !p.lit(",") {
		return nil, false
	}
	ref, ok := p.field(`"imageRef":`, true)
	if !ok {
		return nil, false
	}
	r.ImageRef = ref
	if !p.lit(`,"credentialMapping":{`) {
		return r, true // the mapping is omitted when empty
	}
	if !p.validate {
		r.CredentialMapping = map[string]ImagePullCredentials{}
	}
	prev := ""
	i := 0
	for ; ; i++ {
		if i > 0 && !p.lit(",") {
			break
		}
		name, ok := p.str()
		if !ok || (i > 0 && name <= prev) || !p.lit(":") {
			return nil, false
		}
		creds, ok := p.credentials()
		if !ok {
			return nil, false
		}
		if !p.validate {
			r.CredentialMapping[name] = creds
		}
		prev = name
	}
	// An empty mapping is omitted by the encoder, never written as {}.
	return r, i > 0 && p.lit("}")
}

func (p *canonParser) credentials() (ImagePullCredentials, bool) {
	var c ImagePullCredentials
	if !p.lit("{") {
		return c, false
	}
	needComma := false
	if p.lit(`"kubernetesSecrets":[`) {
		for i := 0; i == 0 || p.lit(","); i++ {
			var s ImagePullSecret
			ok := p.lit("{")
			if ok {
				s.UID, ok = p.field(`"uid":`, false)
			}
			if ok {
				s.Namespace, ok = p.field(`"namespace":`, false)
			}
			if ok {
				s.Name, ok = p.field(`"name":`, false)
			}
			if ok {
				s.CredentialHash, ok = p.field(`"credentialHash":`, true)
			}
			if !ok || !p.lit("}") {
				return c, false
			}
			if !p.validate {
				c.KubernetesSecrets = append(c.KubernetesSecrets, s)
			}
		}
		if !p.lit("]") {
			return c, false
		}
		needComma = true
	}
	if needComma && p.lit(`,"kubernetesServiceAccounts":[`) || !needComma && p.lit(`"kubernetesServiceAccounts":[`) {
		for i := 0; i == 0 || p.lit(","); i++ {
			var sa ImagePullServiceAccount
			ok := p.lit("{")
			if ok {
				sa.UID, ok = p.field(`"uid":`, false)
			}
			if ok {
				sa.Namespace, ok = p.field(`"namespace":`, false)
			}
			if ok {
				sa.Name, ok = p.field(`"name":`, true)
			}
			if !ok || !p.lit("}") {
				return c, false
			}
			if !p.validate {
				c.KubernetesServiceAccounts = append(c.KubernetesServiceAccounts, sa)
			}
		}
		if !p.lit("]") {
			return c, false
		}
		needComma = true
	}
	if needComma && p.lit(`,"nodePodsAccessible":true`) || !needComma && p.lit(`"nodePodsAccessible":true`) {
		c.NodePodsAccessible = true
	}
	return c, p.lit("}")
}

package credstamp

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeStamp: the decoder never panics, and whatever it accepts is a
// key whose own file name it was read under, and reads back the same after
// encoding. The name is derived from the fuzzed content as a lenient parse
// sees it, so the fuzzer reaches the accepting path; a fixed name checks
// that content never vouches under another key's name.
func FuzzDecodeStamp(f *testing.F) {
	for _, k := range []Key{testKey(1), {Credential: "anonymous", Repository: "docker.io/library/busybox", Digest: "sha256:abc"}} {
		data, err := encodeStamp(k, t0)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fixed := testKey(99)
		if k, _, err := decodeStamp(fixed.fileName(), data); err == nil && k != fixed {
			t.Fatalf("content for %+v accepted under the name of %+v", k, fixed)
		}
		var loose stampFile
		_ = json.Unmarshal(data, &loose)
		name := Key{Credential: loose.Credential, Repository: loose.Repository, Digest: loose.Digest}.fileName()
		k, ts, err := decodeStamp(name, data)
		if err != nil {
			return
		}
		if k.fileName() != name {
			t.Fatalf("accepted %+v under the name %s, its own is %s", k, name, k.fileName())
		}
		again, err := encodeStamp(k, ts)
		if err != nil {
			t.Fatalf("encoding an accepted stamp: %v", err)
		}
		k2, ts2, err := decodeStamp(name, again)
		if err != nil || k2 != k || !ts2.Equal(ts) {
			t.Fatalf("round trip of %+v at %v: %+v at %v, %v", k, ts, k2, ts2, err)
		}
	})
}

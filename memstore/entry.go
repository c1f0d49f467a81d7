package memstore

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pullrecords/pullrecords/accessor"
)

// recordEntry is the compact, immutable form in which both Store and Cache
// keep a pulled record. A Go map per record costs about 700 bytes even for
// two names, and an ImagePulledRecord is a dozen small allocations, so an
// entry is three: the struct, one string holding the imageRef and the names,
// and a slice with one encoded credentials string per name. The credentials
// of one name (its secrets, service accounts and flag) repeat across the
// records of a node, since the same secrets pull many images: a cache
// warm-up shares equal credentials strings between entries (see interner).
// Strings hold no pointers, so the garbage collector never scans them.
//
// Every field except peeked is set once, before the entry is published, and
// never changed. peeked holds the record handed out by PeekImagePulledRecord,
// built on the first peek and shared by every later one. Strings in the
// records built from an entry are substrings of the entry's strings: strings
// are immutable, so sharing them is safe, and a materialised record costs no
// string allocation.
type recordEntry struct {
	// data is the imageRef (its first refLen bytes), then each name in
	// ascending order as a uvarint length and the bytes.
	data string
	// creds holds each name's credentials, in name order (see
	// appendCreds); nil for a nil mapping, empty for an empty one.
	creds   []string
	refLen  int32
	updated int64 // Unix seconds; the zero time round-trips through it
	peeked  atomic.Pointer[accessor.ImagePulledRecord]
}

func (e *recordEntry) ref() string { return e.data[:e.refLen] }

// The credentials encoding of one name: a flags byte, the number of secrets
// and of service accounts (uvarints), each secret's UID, Namespace, Name and
// CredentialHash, then each service account's UID, Namespace and Name.
// Strings are a uvarint length and the bytes.
const (
	flagNodeWide = 1 << iota
	flagSecrets  // KubernetesSecrets is not nil
	flagSAs      // KubernetesServiceAccounts is not nil
)

var emptyCreds = []string{}

// interner shares equal credentials strings between the entries built
// during one warm-up. It lives only as long as the warm-up, so it never
// keeps a string the entries no longer use; later writes are not shared.
type interner struct {
	mu sync.Mutex
	m  map[string]string
}

func newInterner() *interner { return &interner{m: map[string]string{}} }

func (in *interner) intern(b []byte) string {
	if in == nil {
		return string(b)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	in.m[s] = s
	return s
}

// newRecordEntry returns the compact form of r with its time in storage form.
// It shares no memory with r. in, if not nil, shares credentials strings with
// other entries.
func newRecordEntry(r *accessor.ImagePulledRecord, in *interner) *recordEntry {
	e := &recordEntry{
		refLen:  int32(len(r.ImageRef)),
		updated: accessor.StorageTime(r.LastUpdatedTime.Time).Unix(),
	}
	if r.CredentialMapping == nil {
		e.data = strings.Clone(r.ImageRef)
		return e
	}
	if len(r.CredentialMapping) == 0 {
		e.data, e.creds = strings.Clone(r.ImageRef), emptyCreds
		return e
	}
	var namesArr [8]string
	names := namesArr[:0]
	size := len(r.ImageRef)
	for name := range r.CredentialMapping {
		names = append(names, name)
		size += binary.MaxVarintLen64 + len(name)
	}
	slices.Sort(names)
	data := make([]byte, 0, size)
	data = append(data, r.ImageRef...)
	var scratchArr [512]byte
	scratch := scratchArr[:0]
	e.creds = make([]string, len(names))
	for i, name := range names {
		data = appendStr(data, name)
		scratch = appendCreds(scratch[:0], r.CredentialMapping[name])
		e.creds[i] = in.intern(scratch)
	}
	e.data = string(data)
	return e
}

func appendCreds(buf []byte, c accessor.ImagePullCredentials) []byte {
	var flags byte
	if c.NodePodsAccessible {
		flags |= flagNodeWide
	}
	if c.KubernetesSecrets != nil {
		flags |= flagSecrets
	}
	if c.KubernetesServiceAccounts != nil {
		flags |= flagSAs
	}
	buf = append(buf, flags)
	buf = binary.AppendUvarint(buf, uint64(len(c.KubernetesSecrets)))
	buf = binary.AppendUvarint(buf, uint64(len(c.KubernetesServiceAccounts)))
	for _, s := range c.KubernetesSecrets {
		buf = appendStr(buf, s.UID)
		buf = appendStr(buf, s.Namespace)
		buf = appendStr(buf, s.Name)
		buf = appendStr(buf, s.CredentialHash)
	}
	for _, sa := range c.KubernetesServiceAccounts {
		buf = appendStr(buf, sa.UID)
		buf = appendStr(buf, sa.Namespace)
		buf = appendStr(buf, sa.Name)
	}
	return buf
}

func appendStr(buf []byte, s string) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(s))), s...)
}

// reader walks a string newRecordEntry encoded. The encoding never changes
// after it is made, so reads rely on Go's bounds checks alone.
type reader struct {
	s   string
	pos int
}

func (r *reader) uvarint() int {
	var v uint64
	for shift := 0; ; shift += 7 {
		b := r.s[r.pos]
		r.pos++
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return int(v)
		}
	}
}

func (r *reader) str() string {
	n := r.uvarint()
	s := r.s[r.pos : r.pos+n]
	r.pos += n
	return s
}

func (r *reader) byte() byte {
	b := r.s[r.pos]
	r.pos++
	return b
}

// counts returns the number of secrets and service accounts over all names.
func (e *recordEntry) counts() (secrets, sas int) {
	for _, c := range e.creds {
		r := reader{s: c, pos: 1}
		secrets += r.uvarint()
		sas += r.uvarint()
	}
	return secrets, sas
}

// slabs are the backing arrays a materialised record's slices are cut from.
// Cutting many small slices from one allocation keeps Get and List cheap; every
// slice is cut with its capacity equal to its length, so a caller appending to
// one never writes into another.
type slabs struct {
	secrets []accessor.ImagePullSecret
	sas     []accessor.ImagePullServiceAccount
}

func newSlabs(nSecrets, nSAs int) slabs {
	var s slabs
	if nSecrets > 0 {
		s.secrets = make([]accessor.ImagePullSecret, 0, nSecrets)
	}
	if nSAs > 0 {
		s.sas = make([]accessor.ImagePullServiceAccount, 0, nSAs)
	}
	return s
}

// fill sets *out to a full record built from e, taking slices from s.
func (e *recordEntry) fill(out *accessor.ImagePulledRecord, s *slabs) {
	out.ImageRef = e.ref()
	out.LastUpdatedTime.Time = time.Unix(e.updated, 0).UTC()
	if e.creds == nil {
		return
	}
	out.CredentialMapping = make(map[string]accessor.ImagePullCredentials, len(e.creds))
	names := reader{s: e.data, pos: int(e.refLen)}
	for _, creds := range e.creds {
		name := names.str()
		r := reader{s: creds}
		flags := r.byte()
		nSecrets, nSAs := r.uvarint(), r.uvarint()
		c := accessor.ImagePullCredentials{NodePodsAccessible: flags&flagNodeWide != 0}
		if flags&flagSecrets != 0 {
			start := len(s.secrets)
			for range nSecrets {
				s.secrets = append(s.secrets, accessor.ImagePullSecret{UID: r.str(), Namespace: r.str(), Name: r.str(), CredentialHash: r.str()})
			}
			c.KubernetesSecrets = s.secrets[start:len(s.secrets):len(s.secrets)]
			if c.KubernetesSecrets == nil {
				c.KubernetesSecrets = []accessor.ImagePullSecret{}
			}
		}
		if flags&flagSAs != 0 {
			start := len(s.sas)
			for range nSAs {
				s.sas = append(s.sas, accessor.ImagePullServiceAccount{UID: r.str(), Namespace: r.str(), Name: r.str()})
			}
			c.KubernetesServiceAccounts = s.sas[start:len(s.sas):len(s.sas)]
			if c.KubernetesServiceAccounts == nil {
				c.KubernetesServiceAccounts = []accessor.ImagePullServiceAccount{}
			}
		}
		out.CredentialMapping[name] = c
	}
}

// smallRecord is a record with room for the secrets and service accounts
// of most records, allocated at once: a copy then costs this allocation and
// its map's. A caller that keeps only one of its slices keeps the whole
// block alive, which is harmless.
type smallRecord struct {
	rec     accessor.ImagePulledRecord
	secrets [2]accessor.ImagePullSecret
	sas     [2]accessor.ImagePullServiceAccount
}

// record returns a new record equal to e that shares no mutable memory with
// anything else.
func (e *recordEntry) record() *accessor.ImagePulledRecord {
	nSecrets, nSAs := e.counts()
	if nSecrets <= 2 && nSAs <= 2 {
		b := new(smallRecord)
		s := slabs{secrets: b.secrets[:0:nSecrets], sas: b.sas[:0:nSAs]}
		e.fill(&b.rec, &s)
		return &b.rec
	}
	s := newSlabs(nSecrets, nSAs)
	out := new(accessor.ImagePulledRecord)
	e.fill(out, &s)
	return out
}

// peek returns the shared, read-only record for e, building it on first use.
func (e *recordEntry) peek() *accessor.ImagePulledRecord {
	if r := e.peeked.Load(); r != nil {
		return r
	}
	r := e.record()
	if e.peeked.CompareAndSwap(nil, r) {
		return r
	}
	return e.peeked.Load()
}

// records materialises entries into new records. The records, their secrets
// and their service accounts are each cut from one allocation.
func records(entries []*recordEntry) []*accessor.ImagePulledRecord {
	var nSecrets, nSAs int
	for _, e := range entries {
		ns, na := e.counts()
		nSecrets += ns
		nSAs += na
	}
	s := newSlabs(nSecrets, nSAs)
	backing := make([]accessor.ImagePulledRecord, len(entries))
	out := make([]*accessor.ImagePulledRecord, len(entries))
	for i, e := range entries {
		e.fill(&backing[i], &s)
		out[i] = &backing[i]
	}
	return out
}

package memstore

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unique"

	"github.com/pullrecords/pullrecords/accessor"
)

// recordEntry is the compact, immutable form in which both Store and Cache
// keep a pulled record. A Go map per record costs about 700 bytes even for two
// names, so the mapping is kept as a sorted slice instead, and the credential
// strings, which repeat across many records on a node (the same secrets and
// service accounts pull many images), are interned with package unique.
//
// Every field except peeked is set once, before the entry is published, and
// never changed. peeked holds the record handed out by PeekImagePulledRecord,
// built on the first peek and shared by every later one.
type recordEntry struct {
	ref      string
	updated  int64       // Unix seconds; the zero time round-trips through it
	mapping  []credEntry // nil for a nil mapping; sorted by name
	nSecrets int32       // total secrets over all names
	nSAs     int32       // total service accounts over all names
	peeked   atomic.Pointer[accessor.ImagePulledRecord]
}

type credEntry struct {
	name     string
	secrets  []secretHandles // nil when the record had a nil slice
	sas      []saHandles     // nil when the record had a nil slice
	nodeWide bool
}

// A secret or service account is interned whole: one handle (one pointer)
// per reference, and one unique.Make per secret rather than one per string,
// which is what a cache warm-up over many records pays for.
type (
	secretHandles = unique.Handle[accessor.ImagePullSecret]
	saHandles     = unique.Handle[accessor.ImagePullServiceAccount]
)

// newRecordEntry returns the compact form of r with its time in storage form.
// It shares no memory with r.
func newRecordEntry(r *accessor.ImagePulledRecord) *recordEntry {
	e := &recordEntry{
		ref:     r.ImageRef,
		updated: accessor.StorageTime(r.LastUpdatedTime.Time).Unix(),
	}
	if r.CredentialMapping == nil {
		return e
	}
	var nSecrets, nSAs int
	for _, c := range r.CredentialMapping {
		nSecrets += len(c.KubernetesSecrets)
		nSAs += len(c.KubernetesServiceAccounts)
	}
	e.nSecrets, e.nSAs = int32(nSecrets), int32(nSAs)
	// One allocation each for the names, the secrets and the service
	// accounts of the whole record.
	e.mapping = make([]credEntry, 0, len(r.CredentialMapping))
	var secrets []secretHandles
	if nSecrets > 0 {
		secrets = make([]secretHandles, 0, nSecrets)
	}
	var sas []saHandles
	if nSAs > 0 {
		sas = make([]saHandles, 0, nSAs)
	}
	for name, c := range r.CredentialMapping {
		ce := credEntry{name: name, nodeWide: c.NodePodsAccessible}
		if c.KubernetesSecrets != nil {
			start := len(secrets)
			for _, s := range c.KubernetesSecrets {
				secrets = append(secrets, unique.Make(s))
			}
			ce.secrets = secrets[start:len(secrets):len(secrets)]
			if ce.secrets == nil {
				ce.secrets = []secretHandles{}
			}
		}
		if c.KubernetesServiceAccounts != nil {
			start := len(sas)
			for _, sa := range c.KubernetesServiceAccounts {
				sas = append(sas, unique.Make(sa))
			}
			ce.sas = sas[start:len(sas):len(sas)]
			if ce.sas == nil {
				ce.sas = []saHandles{}
			}
		}
		e.mapping = append(e.mapping, ce)
	}
	slices.SortFunc(e.mapping, func(a, b credEntry) int { return strings.Compare(a.name, b.name) })
	return e
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
	out.ImageRef = e.ref
	out.LastUpdatedTime.Time = time.Unix(e.updated, 0).UTC()
	if e.mapping == nil {
		return
	}
	out.CredentialMapping = make(map[string]accessor.ImagePullCredentials, len(e.mapping))
	for i := range e.mapping {
		ce := &e.mapping[i]
		c := accessor.ImagePullCredentials{NodePodsAccessible: ce.nodeWide}
		if ce.secrets != nil {
			start := len(s.secrets)
			for _, h := range ce.secrets {
				s.secrets = append(s.secrets, h.Value())
			}
			c.KubernetesSecrets = s.secrets[start:len(s.secrets):len(s.secrets)]
			if c.KubernetesSecrets == nil {
				c.KubernetesSecrets = []accessor.ImagePullSecret{}
			}
		}
		if ce.sas != nil {
			start := len(s.sas)
			for _, h := range ce.sas {
				s.sas = append(s.sas, h.Value())
			}
			c.KubernetesServiceAccounts = s.sas[start:len(s.sas):len(s.sas)]
			if c.KubernetesServiceAccounts == nil {
				c.KubernetesServiceAccounts = []accessor.ImagePullServiceAccount{}
			}
		}
		out.CredentialMapping[ce.name] = c
	}
}

// record returns a new record equal to e that shares no mutable memory with
// anything else.
func (e *recordEntry) record() *accessor.ImagePulledRecord {
	s := newSlabs(int(e.nSecrets), int(e.nSAs))
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
		nSecrets += int(e.nSecrets)
		nSAs += int(e.nSAs)
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

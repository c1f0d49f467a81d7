package pullmanager

import (
	"cmp"
	"slices"
	"time"

	"github.com/pullrecords/pullrecords/accessor"
)

// newRecord returns the record written for a first pull of imageRef: an empty
// (non-nil) mapping, plus creds under key if creds is not nil, stored exactly
// as given (kubelet behaviour: the first insert is neither sorted nor
// de-duplicated). A record with an empty mapping means "pulled by the
// kubelet, every pod must re-verify".
func newRecord(imageRef, key string, creds *accessor.ImagePullCredentials, now time.Time) *accessor.ImagePulledRecord {
	rec := &accessor.ImagePulledRecord{
		LastUpdatedTime:   accessor.StorageTime(now),
		ImageRef:          imageRef,
		CredentialMapping: map[string]accessor.ImagePullCredentials{},
	}
	if creds != nil {
		rec.CredentialMapping[key] = creds.DeepCopy()
	}
	return rec
}

// credentialsEmpty reports whether creds prove nothing: nil, or neither
// node-wide access, secrets nor service accounts. The kubelet's merge
// ignores such credentials for an existing record.
func credentialsEmpty(creds *accessor.ImagePullCredentials) bool {
	return creds == nil || (!creds.NodePodsAccessible && len(creds.KubernetesSecrets) == 0 && len(creds.KubernetesServiceAccounts) == 0)
}

// markPulledUnder returns the record that says the kubelet pulled imageRef
// under key with no usable credentials: a new record with an empty entry for
// key, or a copy of rec with one added when key has no entry yet. An
// existing entry is left as it is (changed is false). Only the
// kubernetes#138175 protection writes this; the kubelet writes an empty
// mapping instead, which that protection cannot tell apart from "preloaded
// under this name" once another name is added.
func markPulledUnder(rec *accessor.ImagePulledRecord, found bool, imageRef, key string, now time.Time) (out *accessor.ImagePulledRecord, changed bool) {
	if !found {
		return newRecord(imageRef, key, &accessor.ImagePullCredentials{}, now), true
	}
	if _, ok := rec.CredentialMapping[key]; ok {
		return rec, false
	}
	out = rec.DeepCopy()
	if out.CredentialMapping == nil {
		out.CredentialMapping = map[string]accessor.ImagePullCredentials{}
	}
	out.CredentialMapping[key] = accessor.ImagePullCredentials{}
	out.LastUpdatedTime = accessor.StorageTime(now)
	return out, true
}

// mergeCredentials merges creds into rec's mapping entry for key, with the
// kubelet's rules:
//   - nil creds, or creds with no node-wide access, no secrets and no service
//     accounts, change nothing;
//   - a missing entry becomes creds, as given;
//   - an entry with node-wide access never changes (node-wide is sticky);
//   - node-wide creds replace the entry with {NodePodsAccessible: true},
//     dropping its secrets and service accounts;
//   - otherwise, if creds has secrets they are merged by (UID, namespace,
//     name), the new hash winning, and the list is sorted by namespace, name,
//     UID (service accounts in creds are then ignored);
//   - otherwise the service accounts are unioned on the whole triple and
//     sorted by namespace, name, UID.
//
// rec is never modified (it may be shared with a cache): when something
// changes, the result is a deep copy with LastUpdatedTime set to now and
// changed is true; otherwise rec itself is returned.
func mergeCredentials(rec *accessor.ImagePulledRecord, key string, creds *accessor.ImagePullCredentials, now time.Time) (out *accessor.ImagePulledRecord, changed bool) {
	if credentialsEmpty(creds) {
		return rec, false
	}
	entry, exists := rec.CredentialMapping[key]
	var merged accessor.ImagePullCredentials
	switch {
	case !exists:
		merged = creds.DeepCopy()
	case entry.NodePodsAccessible:
		return rec, false
	case creds.NodePodsAccessible:
		merged = accessor.ImagePullCredentials{NodePodsAccessible: true}
	case len(creds.KubernetesSecrets) > 0:
		secrets, ok := mergeSecrets(entry.KubernetesSecrets, creds.KubernetesSecrets)
		if !ok {
			return rec, false
		}
		merged = entry.DeepCopy()
		merged.KubernetesSecrets = secrets
	default:
		sas, ok := mergeServiceAccounts(entry.KubernetesServiceAccounts, creds.KubernetesServiceAccounts)
		if !ok {
			return rec, false
		}
		merged = entry.DeepCopy()
		merged.KubernetesServiceAccounts = sas
	}
	out = rec.DeepCopy()
	if out.CredentialMapping == nil {
		out.CredentialMapping = map[string]accessor.ImagePullCredentials{}
	}
	out.CredentialMapping[key] = merged
	out.LastUpdatedTime = accessor.StorageTime(now)
	return out, true
}

// mergeSecrets merges add into have, keyed by (UID, Namespace, Name); a
// secret in add replaces the hash of the one with the same key (later items
// win over earlier ones). It returns a new slice, de-duplicated by key and
// sorted by namespace, name, UID, and true when a key was new or a hash
// changed; or (nil, false) when nothing changed.
func mergeSecrets(have, add []accessor.ImagePullSecret) ([]accessor.ImagePullSecret, bool) {
	type coords struct{ uid, ns, name string }
	hashes := make(map[coords]string, len(have)+len(add))
	for _, s := range have {
		hashes[coords{s.UID, s.Namespace, s.Name}] = s.CredentialHash
	}
	changed := false
	for _, s := range add {
		k := coords{s.UID, s.Namespace, s.Name}
		if h, ok := hashes[k]; !ok || h != s.CredentialHash {
			hashes[k] = s.CredentialHash
			changed = true
		}
	}
	if !changed {
		return nil, false
	}
	out := make([]accessor.ImagePullSecret, 0, len(hashes))
	for k, h := range hashes {
		out = append(out, accessor.ImagePullSecret{UID: k.uid, Namespace: k.ns, Name: k.name, CredentialHash: h})
	}
	slices.SortFunc(out, func(a, b accessor.ImagePullSecret) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return out, true
}

// mergeServiceAccounts returns the union of have and add (equal only when UID,
// namespace and name all match), de-duplicated and sorted by namespace, name,
// UID, and true; or (nil, false) when add brings nothing new.
func mergeServiceAccounts(have, add []accessor.ImagePullServiceAccount) ([]accessor.ImagePullServiceAccount, bool) {
	set := make(map[accessor.ImagePullServiceAccount]struct{}, len(have)+len(add))
	for _, sa := range have {
		set[sa] = struct{}{}
	}
	changed := false
	for _, sa := range add {
		if _, ok := set[sa]; !ok {
			set[sa] = struct{}{}
			changed = true
		}
	}
	if !changed {
		return nil, false
	}
	out := make([]accessor.ImagePullServiceAccount, 0, len(set))
	for sa := range set {
		out = append(out, sa)
	}
	slices.SortFunc(out, func(a, b accessor.ImagePullServiceAccount) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return out, true
}

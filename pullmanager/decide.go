package pullmanager

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// writeRecordWhileMatchingLimit is the kubelet's limit: a check adds a pod's
// secret to an entry only while the entry holds fewer secrets than this.
const writeRecordWhileMatchingLimit = 100

// The steps of the decision order (facts §4.5) that can answer a check, as
// Explanation.Step reports them.
const (
	StepImageNotPresent     = 1  // imageRef is empty: must pull
	StepRecordsError        = 4  // a record or intent could not be read: must pull (fail safe)
	StepPolicy              = 5  // the policy does not require verification: may use
	StepNoRecord            = 6  // no pulled record for the imageRef: must pull
	StepNameParse           = 7  // the image string does not parse: must pull (fail safe)
	StepNoMappingEntry      = 8  // no credentials recorded for the image's name: must pull
	StepNodeWide            = 9  // the entry is node-wide: may use
	StepNothingToMatch      = 10 // the entry has no secrets and no service accounts: must pull
	StepPodCredentials      = 11 // the pod's credentials could not be looked up: must pull, with the error
	StepSecretMatch         = 12 // a pod secret matches: may use
	StepServiceAccountMatch = 13 // the pod's service account matches: may use
	StepNoMatch             = 14 // nothing matched: must pull
)

// stepRecordLookup is the step that reads the record and the intent; it
// answers only through StepRecordsError.
const stepRecordLookup = 3

// verdict is what decide answers.
type verdict struct {
	mustPull bool
	result   checkResult // the metric label; meaningless at StepImageNotPresent
	step     uint8       // the deciding step
	err      error       // returned by MustAttemptImagePull (StepPodCredentials only)
}

// MustAttemptImagePull reports whether a pod asking for image, present on
// the node as imageRef ("" when absent), must pull it to prove its
// credentials. The decision follows the kubelet's order step by step (see
// the package documentation). It fails safe: any error reading records means
// true with a nil error; only an error from getPodCredentials is returned
// (with true). ExplainImagePull tells how the answer is reached.
func (m *PullManager) MustAttemptImagePull(ctx context.Context, image, imageRef string, getPodCredentials GetPodCredentials) (bool, error) {
	if m.metrics == nil || imageRef == "" {
		v := m.decide(ctx, image, imageRef, getPodCredentials, false, nil)
		return v.mustPull, v.err
	}
	start := m.clock.Now()
	v := m.decide(ctx, image, imageRef, getPodCredentials, false, nil)
	m.metrics.observeCheck(v.result, m.clock.Since(start))
	return v.mustPull, v.err
}

// decide is the one implementation of the decision, for both
// MustAttemptImagePull and ExplainImagePull. With dryRun it neither writes,
// logs nor counts metrics: the write a check would make is reported in tr
// instead. tr, when not nil, receives a line per step taken; every use of it
// is behind a nil check, so a check (tr == nil) formats nothing and
// allocates nothing for it.
func (m *PullManager) decide(ctx context.Context, image, imageRef string, getPodCredentials GetPodCredentials, dryRun bool, tr *Explanation) verdict {
	// Step 1 (steps 2 and 4 are the metric and the error exit).
	if imageRef == "" {
		if tr != nil {
			tr.traceNotPresent()
		}
		return verdict{mustPull: true, step: StepImageNotPresent}
	}
	if tr != nil {
		tr.step(StepImageNotPresent, checkPresent, "yes, as "+imageRef)
	}
	metrics := m.metrics
	if dryRun {
		metrics = nil
	}

	// Steps 3-4: find out whether the kubelet pulled (or is pulling) the
	// image, lock-free. Writers record the pull, then bump intentDrops, then
	// drop the intent; so if the intent read finds nothing and intentDrops
	// moved since before the record read, the record is read again (see the
	// package documentation).
	drops := m.intentDrops.Load()
	rec, found, err := m.readRecord(imageRef)
	if err != nil {
		return m.recordsError(ctx, imageRef, err, false, dryRun, tr)
	}
	pulledByKubelet := m.countsAsPulled(image, rec, found)
	var inFlight, intent, reread bool
	if !pulledByKubelet {
		inFlight, intent, err = m.intentState(image)
		if err != nil {
			return m.recordsError(ctx, imageRef, err, true, dryRun, tr)
		}
		switch {
		case inFlight || intent:
			pulledByKubelet = true
		case m.intentDrops.Load() != drops:
			reread = true
			if rec, found, err = m.readRecord(imageRef); err != nil {
				return m.recordsError(ctx, imageRef, err, false, dryRun, tr)
			}
			pulledByKubelet = m.countsAsPulled(image, rec, found)
		}
	}
	if metrics != nil {
		metrics.recordLookup(found)
	}
	if tr != nil {
		tr.traceLookup(image, rec, found, pulledByKubelet, inFlight, intent, reread)
	}

	// Step 5: the policy comes before the record's contents.
	if !m.policy.RequireCredentialVerificationForImage(image, pulledByKubelet) {
		if tr != nil {
			tr.tracePolicy(m.policy, false)
		}
		return verdict{result: resultPolicyAllowed, step: StepPolicy}
	}
	if tr != nil {
		tr.tracePolicy(m.policy, true)
	}
	// Step 6.
	if !found {
		if tr != nil {
			tr.decided(StepNoRecord, checkRecordExists, "no: nothing proves any credentials", "no pulled record")
		}
		return verdict{mustPull: true, result: resultMustAuthenticate, step: StepNoRecord}
	}
	if tr != nil {
		tr.step(StepNoRecord, checkRecordExists, "yes")
	}
	// Step 7.
	key, hit, err := m.mappingKey(image)
	if metrics != nil && m.normalizedNames {
		metrics.nameLookup(hit) // only the normalised mode has a name cache
	}
	if err != nil {
		if !dryRun {
			klog.FromContext(ctx).Error(err, "Failed to parse image name, forcing image credentials reverification", "image", image)
		}
		if tr != nil {
			tr.traceNameError(image, err)
		}
		return verdict{mustPull: true, result: resultError, step: StepNameParse}
	}
	if tr != nil {
		tr.step(StepNameParse, checkName, key)
	}
	// Steps 8-10.
	entry, ok := rec.CredentialMapping[key]
	if tr != nil {
		tr.traceEntry(key, rec, entry, ok)
	}
	if !ok {
		return verdict{mustPull: true, result: resultMustAuthenticate, step: StepNoMappingEntry}
	}
	if entry.NodePodsAccessible {
		if tr != nil {
			tr.decided(StepNodeWide, "node-wide access", "yes: pulled anonymously or with node credentials, every pod may use it",
				"node-wide access (anonymous or node credentials)")
		}
		return verdict{result: resultRecordFound, step: StepNodeWide}
	}
	if len(entry.KubernetesSecrets) == 0 && len(entry.KubernetesServiceAccounts) == 0 {
		if tr != nil {
			tr.decided(StepNothingToMatch, "recorded secrets or service accounts", "none", "nothing recorded to match")
		}
		return verdict{mustPull: true, result: resultMustAuthenticate, step: StepNothingToMatch}
	}
	// Step 11: only now ask for the pod's credentials (a nil function means
	// the pod has none).
	var podSecrets []accessor.ImagePullSecret
	var podSA *accessor.ImagePullServiceAccount
	if getPodCredentials != nil {
		if podSecrets, podSA, err = getPodCredentials(); err != nil {
			if tr != nil {
				tr.tracePodCredentials(nil, nil, err)
			}
			return verdict{mustPull: true, result: resultError, step: StepPodCredentials, err: err}
		}
	}
	if tr != nil {
		tr.tracePodCredentials(podSecrets, podSA, nil)
	}
	// Step 12.
	cached := entry.KubernetesSecrets
	canWrite := len(cached) < writeRecordWhileMatchingLimit
	for i := range podSecrets {
		ps := &podSecrets[i]
		for j := range cached {
			cs := &cached[j]
			// hashesMatch first: it decides without the coordinates.
			if cs.CredentialHash != "" && cs.CredentialHash == ps.CredentialHash {
				write := canWrite && !sameCoordinates(cs, ps)
				if write && !dryRun {
					m.recordSecretAtCheck(ctx, key, imageRef, *ps)
				}
				if tr != nil {
					m.traceHashMatch(tr, rec, key, cs, ps, write)
				}
				return verdict{result: resultRecordFound, step: StepSecretMatch}
			}
			// coordsMatch with a different (or empty) hash: the same secret
			// object passed before, its rotated content is trusted.
			if canWrite && sameCoordinates(cs, ps) {
				if !dryRun {
					m.recordSecretAtCheck(ctx, key, imageRef, *ps)
				}
				if tr != nil {
					m.traceCoordinatesMatch(tr, rec, key, ps)
				}
				return verdict{result: resultRecordFound, step: StepSecretMatch}
			}
			if tr != nil && sameCoordinates(cs, ps) {
				tr.traceCoordinatesAtLimit(ps, len(cached))
			}
		}
	}
	if tr != nil {
		tr.traceNoSecretMatch(len(podSecrets))
	}
	// Step 13.
	if podSA != nil {
		for _, sa := range entry.KubernetesServiceAccounts {
			if sa == *podSA {
				if tr != nil {
					tr.traceServiceAccount(podSA, true)
				}
				return verdict{result: resultRecordFound, step: StepServiceAccountMatch}
			}
		}
	}
	if tr != nil {
		tr.traceServiceAccount(podSA, false)
		tr.decided(StepNoMatch, "result", "no recorded credential matches the pod's", "no matching credentials")
	}
	// Step 14.
	return verdict{mustPull: true, result: resultMustAuthenticate, step: StepNoMatch}
}

func sameCoordinates(a, b *accessor.ImagePullSecret) bool {
	return a.UID == b.UID && a.Namespace == b.Namespace && a.Name == b.Name
}

// countsAsPulled reports whether the record read for the imageRef makes the
// image "pulled by the kubelet". Upstream, any record does. With
// WithPreloadedImageProtection (kubernetes#138175), only a record with a
// mapping entry for the image's mapping key does; an unparsable name
// keeps the upstream answer.
func (m *PullManager) countsAsPulled(image string, rec *accessor.ImagePulledRecord, found bool) bool {
	if !found || !m.protectPreloaded {
		return found
	}
	// A record without any mapping means "pulled by the kubelet, every pod
	// must re-verify": start-up recovery and credential-less pulls write
	// it. Only a mapping for other names can mean "preloaded under this one".
	if len(rec.CredentialMapping) == 0 {
		return true
	}
	key, _, err := m.mappingKey(image)
	if err != nil {
		return true
	}
	_, ok := rec.CredentialMapping[key]
	return ok
}

// recordsError is the error exit of steps 3-4: must pull, no error
// returned. intent says whether the intent (rather than the record) could
// not be read.
func (m *PullManager) recordsError(ctx context.Context, imageRef string, err error, intent, dryRun bool, tr *Explanation) verdict {
	if !dryRun {
		klog.FromContext(ctx).Error(err, "Unable to access cache records about image pulls", "imageRef", imageRef)
	}
	if tr != nil {
		tr.traceRecordsError(err, intent)
	}
	return verdict{mustPull: true, result: resultError, step: StepRecordsError}
}

// recordSecretAtCheck adds a pod secret that a check accepted to the entry of
// key. Unlike upstream, which writes after releasing its locks, the write
// happens under the record's lock on a fresh read of the record, and is
// skipped if the entry has meanwhile reached the limit. Errors are logged
// and do not change the check's answer.
func (m *PullManager) recordSecretAtCheck(ctx context.Context, key, imageRef string, secret accessor.ImagePullSecret) {
	logger := klog.FromContext(ctx)
	creds := &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{secret}}
	unlock := m.pulledLocks.Lock(imageRef)
	defer unlock()
	err := m.mergeLocked(logger, key, imageRef, creds, func(current *accessor.ImagePulledRecord) bool {
		return current == nil || len(current.CredentialMapping[key].KubernetesSecrets) < writeRecordWhileMatchingLimit
	})
	if err != nil {
		logger.Error(err, "Failed to write an image pulled record", "imageRef", imageRef)
	}
}

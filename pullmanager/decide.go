package pullmanager

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// writeRecordWhileMatchingLimit is the kubelet's limit: a check adds a pod's
// secret to an entry only while the entry holds fewer secrets than this.
const writeRecordWhileMatchingLimit = 100

// MustAttemptImagePull reports whether a pod asking for image, present on
// the node as imageRef ("" when absent), must pull it to prove its
// credentials. The decision follows the kubelet's order step by step (see
// the package documentation). It fails safe: any error reading records means
// true with a nil error; only an error from getPodCredentials is returned
// (with true).
func (m *PullManager) MustAttemptImagePull(ctx context.Context, image, imageRef string, getPodCredentials GetPodCredentials) (bool, error) {
	if imageRef == "" {
		return true, nil
	}
	if m.metrics == nil {
		_, pull, err := m.decide(ctx, image, imageRef, getPodCredentials)
		return pull, err
	}
	start := m.clock.Now()
	result, pull, err := m.decide(ctx, image, imageRef, getPodCredentials)
	m.metrics.observeCheck(result, m.clock.Since(start))
	return pull, err
}

func (m *PullManager) decide(ctx context.Context, image, imageRef string, getPodCredentials GetPodCredentials) (checkResult, bool, error) {
	// Steps 3-4: find out whether the kubelet pulled (or is pulling) the
	// image, lock-free. Writers record the pull, then bump intentDrops, then
	// drop the intent; so if the intent read finds nothing and intentDrops
	// moved since before the record read, the record is read again (see the
	// package documentation).
	drops := m.intentDrops.Load()
	rec, found, err := m.readRecord(imageRef)
	if err != nil {
		return m.recordsError(ctx, imageRef, err)
	}
	pulledByKubelet := m.countsAsPulled(image, rec, found)
	if !pulledByKubelet {
		intent, err := m.intentPresent(image)
		if err != nil {
			return m.recordsError(ctx, imageRef, err)
		}
		switch {
		case intent:
			pulledByKubelet = true
		case m.intentDrops.Load() != drops:
			if rec, found, err = m.readRecord(imageRef); err != nil {
				return m.recordsError(ctx, imageRef, err)
			}
			pulledByKubelet = m.countsAsPulled(image, rec, found)
		}
	}
	if m.metrics != nil {
		m.metrics.recordLookup(found)
	}

	// Step 5: the policy comes before the record's contents.
	if !m.policy.RequireCredentialVerificationForImage(image, pulledByKubelet) {
		return resultPolicyAllowed, false, nil
	}
	// Step 6.
	if !found {
		return resultMustAuthenticate, true, nil
	}
	// Step 7.
	key, hit, err := normalizeCached(image)
	if m.metrics != nil {
		m.metrics.nameLookup(hit)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to parse image name, forcing image credentials reverification", "image", image)
		return resultError, true, nil
	}
	// Steps 8-10.
	entry, ok := rec.CredentialMapping[key]
	if !ok {
		return resultMustAuthenticate, true, nil
	}
	if entry.NodePodsAccessible {
		return resultRecordFound, false, nil
	}
	if len(entry.KubernetesSecrets) == 0 && len(entry.KubernetesServiceAccounts) == 0 {
		return resultMustAuthenticate, true, nil
	}
	// Step 11: only now ask for the pod's credentials (a nil function means
	// the pod has none).
	var podSecrets []accessor.ImagePullSecret
	var podSA *accessor.ImagePullServiceAccount
	if getPodCredentials != nil {
		if podSecrets, podSA, err = getPodCredentials(); err != nil {
			return resultError, true, err
		}
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
				if canWrite && !sameCoordinates(cs, ps) {
					m.recordSecretAtCheck(ctx, key, imageRef, *ps)
				}
				return resultRecordFound, false, nil
			}
			// coordsMatch with a different (or empty) hash: the same secret
			// object passed before, its rotated content is trusted.
			if canWrite && sameCoordinates(cs, ps) {
				m.recordSecretAtCheck(ctx, key, imageRef, *ps)
				return resultRecordFound, false, nil
			}
		}
	}
	// Step 13.
	if podSA != nil {
		for _, sa := range entry.KubernetesServiceAccounts {
			if sa == *podSA {
				return resultRecordFound, false, nil
			}
		}
	}
	// Step 14.
	return resultMustAuthenticate, true, nil
}

func sameCoordinates(a, b *accessor.ImagePullSecret) bool {
	return a.UID == b.UID && a.Namespace == b.Namespace && a.Name == b.Name
}

// countsAsPulled reports whether the record read for the imageRef makes the
// image "pulled by the kubelet". Upstream, any record does. With
// WithPreloadedImageProtection (kubernetes#138175), only a record with a
// mapping entry for the image's normalised name does; an unparsable name
// keeps the upstream answer.
func (m *PullManager) countsAsPulled(image string, rec *accessor.ImagePulledRecord, found bool) bool {
	if !found || !m.protectPreloaded {
		return found
	}
	key, _, err := normalizeCached(image)
	if err != nil {
		return true
	}
	_, ok := rec.CredentialMapping[key]
	return ok
}

func (m *PullManager) recordsError(ctx context.Context, imageRef string, err error) (checkResult, bool, error) {
	klog.FromContext(ctx).Error(err, "Unable to access cache records about image pulls", "imageRef", imageRef)
	return resultError, true, nil
}

// recordSecretAtCheck adds a pod secret that a check accepted to the entry of
// key. Unlike upstream, which writes after releasing its locks, the write
// happens under the record's lock on a fresh read of the record, and is
// skipped if the entry has meanwhile reached the limit. Errors are logged
// and do not change the check's answer.
func (m *PullManager) recordSecretAtCheck(ctx context.Context, key, imageRef string, secret accessor.ImagePullSecret) {
	logger := klog.FromContext(ctx)
	creds := &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{secret}}
	unlock := m.pulledLocks.lock(imageRef)
	defer unlock()
	err := m.mergeLocked(logger, key, imageRef, creds, func(current *accessor.ImagePulledRecord) bool {
		return current == nil || len(current.CredentialMapping[key].KubernetesSecrets) < writeRecordWhileMatchingLimit
	})
	if err != nil {
		logger.Error(err, "Failed to write an image pulled record", "imageRef", imageRef)
	}
}

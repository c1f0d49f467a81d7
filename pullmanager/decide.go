package pullmanager

import (
	"context"
	"slices"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// writeRecordWhileMatchingLimit is the kubelet's limit: a check adds a pod's
// secret to an entry only while the entry holds fewer secrets than this.
const writeRecordWhileMatchingLimit = 100

// Step is a step of the decision order of the kubelet's
// PullManager.MustAttemptImagePull (pkg/kubelet/images/pullmanager/
// image_pull_manager.go), numbered in the order that function takes them:
// 1 the empty-imageRef exit, 2 the deferred metric, 3-4 reading the record
// and intent under the locks (an error exits), 5 the policy, 6-10 the
// record's contents, 11 the pod's credentials, 12 secrets, 13 the service
// account, 14 the final "must pull". The constants below are the steps that
// can answer a check; a check takes the steps in increasing order and stops
// at the one that answers.
type Step int

// The steps that can answer a check, as Explanation.DecidedAt reports them.
const (
	StepImageNotPresent     Step = 1  // imageRef is empty: must pull
	StepRecordsError        Step = 4  // a record or intent could not be read: must pull (fail safe)
	StepPolicy              Step = 5  // the policy does not require verification: may use
	StepNoRecord            Step = 6  // no pulled record for the imageRef: must pull
	StepNameParse           Step = 7  // the image string does not parse: must pull (fail safe)
	StepNoMappingEntry      Step = 8  // no credentials recorded for the image's name: must pull
	StepNodeWide            Step = 9  // the entry is node-wide: may use
	StepNothingToMatch      Step = 10 // the entry has no secrets and no service accounts: must pull
	StepPodCredentials      Step = 11 // the pod's credentials could not be looked up: must pull, with the error
	StepSecretMatch         Step = 12 // a pod secret matches: may use
	StepServiceAccountMatch Step = 13 // the pod's service account matches: may use
	StepNoMatch             Step = 14 // nothing matched: must pull
)

// stepRecordLookup is the step that reads the record and the intent; it
// answers only through StepRecordsError. (Step 2 is the kubelet's metric.)
const stepRecordLookup Step = 3

var stepNames = [...]string{
	StepImageNotPresent:     "ImageNotPresent",
	stepRecordLookup:        "RecordLookup",
	StepRecordsError:        "RecordsError",
	StepPolicy:              "Policy",
	StepNoRecord:            "NoRecord",
	StepNameParse:           "NameParse",
	StepNoMappingEntry:      "NoMappingEntry",
	StepNodeWide:            "NodeWide",
	StepNothingToMatch:      "NothingToMatch",
	StepPodCredentials:      "PodCredentials",
	StepSecretMatch:         "SecretMatch",
	StepServiceAccountMatch: "ServiceAccountMatch",
	StepNoMatch:             "NoMatch",
}

// String returns the step's constant name without "Step" ("SecretMatch"),
// or "Step(n)" for a number that names no step.
func (s Step) String() string {
	if s >= 0 && int(s) < len(stepNames) && stepNames[s] != "" {
		return stepNames[s]
	}
	return "Step(" + strconv.Itoa(int(s)) + ")"
}

// verdict is what decide found: the answer, and the facts it looked at on
// the way there. A fact is set only if the step that looks at it was
// reached (steps are reached in increasing order, up to step).
type verdict struct {
	mustPull bool
	step     Step        // the step that answered
	result   checkResult // the metric label; meaningless at StepImageNotPresent
	err      error       // returned by MustAttemptImagePull (StepPodCredentials only)

	// failSafeErr forced a fail-safe answer without being returned: the
	// read that failed (StepRecordsError; intentErr says it was the intent
	// read) or the image string's parse error (StepNameParse).
	failSafeErr error
	intentErr   bool

	// Steps 3-4: the record read for the imageRef (read again when a pull
	// finished meanwhile), the pull in flight in this process, the stored
	// intent, and what the policy is told.
	rec                      *accessor.ImagePulledRecord
	found                    bool
	inFlight, intent, reread bool
	pulledByKubelet          bool

	// Step 7: the image's mapping key, and whether the name cache had it.
	key          string
	nameCacheHit bool

	// Step 8: the record's entry for the key.
	entry    accessor.ImagePullCredentials
	hasEntry bool

	// Step 11: the pod's credentials.
	podSecrets []accessor.ImagePullSecret
	podSA      *accessor.ImagePullServiceAccount

	// Step 12: the accepted pod secret and the recorded secret it matched
	// (by credential hash, or else by coordinates), and whether the check
	// adds the pod secret to the entry.
	podSecret *accessor.ImagePullSecret
	recorded  *accessor.ImagePullSecret
	byHash    bool
	write     bool

	// Steps 12-13 with credential expiry: the recorded secrets that matched
	// a pod secret but whose proof had expired, and whether the pod's
	// service account matched with an expired proof.
	expiredSecrets        []*accessor.ImagePullSecret
	expiredServiceAccount bool
}

// must and may answer at step, with the check's metric result.
func (v verdict) must(step Step, result checkResult) verdict {
	v.mustPull, v.step, v.result = true, step, result
	return v
}

func (v verdict) may(step Step, result checkResult) verdict {
	v.mustPull, v.step, v.result = false, step, result
	return v
}

// MustAttemptImagePull reports whether a pod asking for image, present on
// the node as imageRef ("" when absent), must pull it to prove its
// credentials. The decision follows the kubelet's order step by step (see
// the package documentation). It fails safe: any error reading records means
// true with a nil error; only an error from getPodCredentials is returned
// (with true). ExplainImagePull tells how the answer is reached.
func (m *PullManager) MustAttemptImagePull(ctx context.Context, image, imageRef string, getPodCredentials GetPodCredentials) (bool, error) {
	timed := m.metrics != nil && imageRef != "" // no check is counted for an absent image
	var start time.Time
	if timed {
		start = m.clock.Now()
	}
	v := m.decide(image, imageRef, getPodCredentials)
	m.act(ctx, image, imageRef, &v)
	if timed {
		m.metrics.observeCheck(v.result, m.clock.Since(start))
	}
	return v.mustPull, v.err
}

// decide is the one implementation of the decision, for both
// MustAttemptImagePull and ExplainImagePull. It reads the records and, when
// a step needs them, the pod's credentials, and returns the answer with the
// facts behind it. It writes nothing, logs nothing and counts nothing: a
// check then acts on the verdict (act), an explanation tells it (explain).
func (m *PullManager) decide(image, imageRef string, getPodCredentials GetPodCredentials) (v verdict) {
	// Step 1 (steps 2 and 4 are the metric and the error exit).
	if imageRef == "" {
		return v.must(StepImageNotPresent, 0)
	}

	// Steps 3-4: was the image pulled (or is it being pulled) by the
	// kubelet? Lock-free: writers record the pull, then bump intentDrops,
	// then drop the intent; so if the intent read finds nothing and
	// intentDrops moved since before the record read, the record is read
	// again (see the package documentation).
	drops := m.intentDrops.Load()
	if v.rec, v.found, v.failSafeErr = m.readRecord(imageRef); v.failSafeErr != nil {
		return v.must(StepRecordsError, resultError)
	}
	v.pulledByKubelet = m.countsAsPulled(image, v.rec, v.found)
	if !v.pulledByKubelet {
		if v.inFlight, v.intent, v.failSafeErr = m.intentState(image); v.failSafeErr != nil {
			v.intentErr = true
			return v.must(StepRecordsError, resultError)
		}
		switch {
		case v.inFlight || v.intent:
			v.pulledByKubelet = true
		case m.intentDrops.Load() != drops:
			v.reread = true
			if v.rec, v.found, v.failSafeErr = m.readRecord(imageRef); v.failSafeErr != nil {
				return v.must(StepRecordsError, resultError)
			}
			v.pulledByKubelet = m.countsAsPulled(image, v.rec, v.found)
		}
	}

	// Step 5: the policy comes before the record's contents.
	if !m.policy.RequireCredentialVerificationForImage(image, v.pulledByKubelet) {
		return v.may(StepPolicy, resultPolicyAllowed)
	}
	// Step 6.
	if !v.found {
		return v.must(StepNoRecord, resultMustAuthenticate)
	}
	// Step 7.
	if v.key, v.nameCacheHit, v.failSafeErr = m.mappingKey(image); v.failSafeErr != nil {
		return v.must(StepNameParse, resultError)
	}
	// Steps 8-10.
	if v.entry, v.hasEntry = v.rec.CredentialMapping[v.key]; !v.hasEntry {
		return v.must(StepNoMappingEntry, resultMustAuthenticate)
	}
	if v.entry.NodePodsAccessible {
		return v.may(StepNodeWide, resultRecordFound)
	}
	if len(v.entry.KubernetesSecrets) == 0 && len(v.entry.KubernetesServiceAccounts) == 0 {
		return v.must(StepNothingToMatch, resultMustAuthenticate)
	}
	// Step 11: only now ask for the pod's credentials (a nil function means
	// the pod has none).
	if getPodCredentials != nil {
		if v.podSecrets, v.podSA, v.err = getPodCredentials(); v.err != nil {
			return v.must(StepPodCredentials, resultError)
		}
	}
	// Step 12.
	cached := v.entry.KubernetesSecrets
	canWrite := len(cached) < writeRecordWhileMatchingLimit
	for i := range v.podSecrets {
		ps := &v.podSecrets[i]
		for j := range cached {
			cs := &cached[j]
			// A non-empty recorded hash equal to the pod secret's hash is
			// tested first and accepts whatever the coordinates are; the pod
			// secret is added only if its coordinates are new. Otherwise
			// equal UID, namespace and name accept the pod secret (the same
			// secret object passed before, so its rotated content is
			// trusted), but only while the entry is under the limit:
			// upstream accepts by coordinates only when it can also write.
			byHash := cs.CredentialHash != "" && cs.CredentialHash == ps.CredentialHash
			if !byHash && !(canWrite && sameCoordinates(cs, ps)) {
				continue
			}
			// With credential expiry, a match whose proof is stale does
			// not vouch; another pair may.
			if !m.secretProven(imageRef, v.key, cs) {
				v.expiredSecrets = append(v.expiredSecrets, cs)
				continue
			}
			v.podSecret, v.recorded, v.byHash = ps, cs, byHash
			v.write = canWrite && (!byHash || !sameCoordinates(cs, ps))
			return v.may(StepSecretMatch, resultRecordFound)
		}
	}
	// Step 13.
	if v.podSA != nil && slices.Contains(v.entry.KubernetesServiceAccounts, *v.podSA) {
		if m.serviceAccountProven(imageRef, v.key, v.podSA) {
			return v.may(StepServiceAccountMatch, resultRecordFound)
		}
		v.expiredServiceAccount = true
	}
	// Step 14.
	return v.must(StepNoMatch, resultMustAuthenticate)
}

// act does what a check does besides answering: it logs the error behind
// a fail-safe answer, counts the record and name lookups, and adds an
// accepted pod secret to the record.
func (m *PullManager) act(ctx context.Context, image, imageRef string, v *verdict) {
	switch v.step {
	case StepImageNotPresent:
		return
	case StepRecordsError:
		klog.FromContext(ctx).Error(v.failSafeErr, "Unable to access cache records about image pulls", "imageRef", imageRef)
		return
	case StepNameParse:
		klog.FromContext(ctx).Error(v.failSafeErr, "Failed to parse image name, forcing image credentials reverification", "image", image)
	}
	if m.metrics != nil {
		m.metrics.recordLookup(v.found)
		if m.normalizedNames && v.step >= StepNameParse { // only the normalised mode has a name cache
			m.metrics.nameLookup(v.nameCacheHit)
		}
	}
	if v.write {
		m.recordSecretAtCheck(ctx, v.key, imageRef, *v.podSecret)
		m.inheritProof(klog.FromContext(ctx), imageRef, v.key, v.recorded, v.podSecret)
	}
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

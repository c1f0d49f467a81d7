package pullmanager

import (
	"context"
	"fmt"
	"strconv"

	"github.com/pullrecords/pullrecords/accessor"
)

// Explanation tells how MustAttemptImagePull answers for one pod and image,
// step by step. ExplainImagePull makes it from the check's own decision. It
// never holds a credential hash. Its JSON form is what the pullrecords
// command prints with -o json.
type Explanation struct {
	// Image and ImageRef are the arguments explained.
	Image    string `json:"image"`
	ImageRef string `json:"imageRef"`
	// Policy is the name of the credential verification policy (its String
	// method), empty for a policy without one.
	Policy string `json:"policy,omitempty"`
	// MustPull is the answer: true means the pod must prove its credentials
	// to the registry.
	MustPull bool `json:"mustPull"`
	// Result is the check's label in the mustpull_checks metric (one of the
	// Result constants); empty when the image is not present, where no check
	// is counted.
	Result string `json:"result"`
	// DecidedAt is the step of the decision order that answered (one of the
	// Step constants).
	DecidedAt Step `json:"decidedAt"`
	// Rule names the rule that answered, in a few words.
	Rule string `json:"rule"`
	// PulledByKubelet is what the policy was told.
	PulledByKubelet bool `json:"pulledByKubelet"`
	// CredentialsLookedUp says whether the pod's credentials were asked for
	// (they are, lazily, only when a decision needs them).
	CredentialsLookedUp bool `json:"credentialsLookedUp"`
	// WouldRecord is the pod secret the check would add to the record (or
	// whose new hash it would store), if any. The explanation does not
	// write it.
	WouldRecord *SecretRef `json:"wouldRecord,omitempty"`
	// Steps are the steps taken, in order; the last one answered.
	Steps []ExplainStep `json:"steps"`
	// Error is the text of FailSafeErr or, failing that, of Err: the error
	// behind the answer, if any, in the JSON form.
	Error string `json:"error,omitempty"`
	// Err is the error MustAttemptImagePull returns: only a failure of
	// getPodCredentials (DecidedAt is StepPodCredentials).
	Err error `json:"-"`
	// FailSafeErr is the error that forced a fail-safe "must pull" without
	// being returned by the check: a record or intent that could not be read
	// (StepRecordsError) or an image string that does not parse
	// (StepNameParse).
	FailSafeErr error `json:"-"`
}

// ExplainStep is one step taken by a decision.
type ExplainStep struct {
	// Number is the step's number in the decision order (1-14), as a Step
	// prints with %d.
	Number int `json:"step"`
	// Check says what the step looks at.
	Check string `json:"check"`
	// Finding says what it found.
	Finding string `json:"finding"`
}

// SecretRef names a secret without its credential hash.
type SecretRef struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ExplainImagePull answers as MustAttemptImagePull would at this moment,
// and tells how. It runs the check's decision code, which reads and never
// writes, and then tells what the decision found instead of acting on it:
// where the check would add the pod's secret to the record it sets
// WouldRecord, and it logs nothing and counts no metrics. It sees what the
// check sees: the records, this manager's in-flight pulls, its policy and
// its options (WithPreloadedImageProtection). getPodCredentials is called
// when, and only when, the check would call it.
//
// A manager built for explanations only can be made over a read-only store
// with a nil ImageLister: NewImagePullManager then writes nothing.
func (m *PullManager) ExplainImagePull(_ context.Context, image, imageRef string, getPodCredentials GetPodCredentials) Explanation {
	v := m.decide(image, imageRef, getPodCredentials)
	return m.explain(image, imageRef, &v)
}

// explain tells the verdict of a decision about image and imageRef as an
// Explanation: every step the decision took, in order, with what it found.
func (m *PullManager) explain(image, imageRef string, v *verdict) Explanation {
	e := Explanation{
		Image:       image,
		ImageRef:    imageRef,
		MustPull:    v.mustPull,
		DecidedAt:   v.step,
		Err:         v.err,
		FailSafeErr: v.failSafeErr,
		Steps:       make([]ExplainStep, 0, 12),
	}
	if s, ok := m.policy.(fmt.Stringer); ok {
		e.Policy = s.String()
	}
	if v.step != StepImageNotPresent {
		e.Result = resultLabels[v.result]
	}
	m.tell(&e, image, imageRef, v)
	switch {
	case e.FailSafeErr != nil:
		e.Error = e.FailSafeErr.Error()
	case e.Err != nil:
		e.Error = e.Err.Error()
	}
	return e
}

// tell adds the steps the decision took, up to the one that answered (which
// also names the rule), in the order decide takes them.
func (m *PullManager) tell(e *Explanation, image, imageRef string, v *verdict) {
	// Step 1.
	if v.step == StepImageNotPresent {
		e.decided(StepImageNotPresent, checkPresent, "no: there is nothing to reuse", "image not present")
		return
	}
	e.step(StepImageNotPresent, checkPresent, "yes, as "+imageRef)
	// Steps 3-4.
	if v.step == StepRecordsError {
		e.tellRecordsError(v.failSafeErr, v.intentErr)
		return
	}
	e.PulledByKubelet = v.pulledByKubelet
	e.step(stepRecordLookup, checkRecord, lookupFinding(image, v))
	// Step 5.
	if v.step == StepPolicy {
		e.tellPolicy(m.policy, false)
		return
	}
	e.tellPolicy(m.policy, true)
	// Step 6.
	if v.step == StepNoRecord {
		e.decided(StepNoRecord, checkRecordExists, "no: nothing proves any credentials", "no pulled record")
		return
	}
	e.step(StepNoRecord, checkRecordExists, "yes")
	// Step 7.
	if v.step == StepNameParse {
		e.decided(StepNameParse, checkName, fmt.Sprintf("cannot parse %q: %v", image, v.failSafeErr), "image name does not parse: fail safe")
		return
	}
	e.step(StepNameParse, checkName, v.key)
	// Steps 8-10.
	e.tellEntry(v.key, v.rec, v.entry, v.hasEntry)
	switch v.step {
	case StepNoMappingEntry:
		return
	case StepNodeWide:
		e.decided(StepNodeWide, "node-wide access", "yes: pulled anonymously or with node credentials, every pod may use it",
			"node-wide access (anonymous or node credentials)")
		return
	case StepNothingToMatch:
		e.decided(StepNothingToMatch, "recorded secrets or service accounts", "none", "nothing recorded to match")
		return
	}
	// Step 11.
	e.CredentialsLookedUp = true
	if v.step == StepPodCredentials {
		e.decided(StepPodCredentials, checkPodCreds, "cannot be looked up: "+v.err.Error(), "pod credentials unavailable: fail safe")
		return
	}
	e.step(StepPodCredentials, checkPodCreds, fmt.Sprintf("%d secret(s), service account %s", len(v.podSecrets), saString(v.podSA)))
	// Step 12: the pairs of pod and recorded secrets decide compared before
	// the one that matched, if any; of these, the ones with the same
	// coordinates were refused at the limit, or (below it) because their
	// proof had expired, which is told next.
	cached := v.entry.KubernetesSecrets
pairs:
	for i := range v.podSecrets {
		ps := &v.podSecrets[i]
		for j := range cached {
			cs := &cached[j]
			if ps == v.podSecret && cs == v.recorded {
				break pairs
			}
			if sameCoordinates(cs, ps) && len(cached) >= writeRecordWhileMatchingLimit {
				e.step(StepSecretMatch, checkSecrets, fmt.Sprintf(
					"secret %s matches recorded coordinates, but %d secrets are recorded (limit %d): not trusted without a hash match",
					secretString(ps), len(cached), writeRecordWhileMatchingLimit))
			}
		}
	}
	for _, cs := range v.expiredSecrets {
		e.step(StepSecretMatch, checkSecrets, fmt.Sprintf(
			"recorded secret %s matches, but no pull with its credential was recorded in the last %v (credential expiry): it no longer vouches",
			secretString(cs), m.expiry))
	}
	if v.step == StepSecretMatch {
		if v.byHash {
			m.tellHashMatch(e, v.rec, v.key, v.recorded, v.podSecret, v.write)
		} else {
			m.tellCoordinatesMatch(e, v.rec, v.key, v.podSecret)
		}
		return
	}
	switch {
	case len(v.podSecrets) == 0:
		e.step(StepSecretMatch, checkSecrets, "the pod has no pull secrets")
	case len(v.expiredSecrets) > 0:
		e.step(StepSecretMatch, checkSecrets, "no pod secret matches a recorded secret whose credential is still proven")
	default:
		e.step(StepSecretMatch, checkSecrets, "no pod secret matches a recorded secret or its credential")
	}
	// Step 13.
	switch {
	case v.step == StepServiceAccountMatch:
		e.decided(StepServiceAccountMatch, checkAccounts, saString(v.podSA)+" was recorded", "matching service account")
		return
	case v.expiredServiceAccount:
		e.step(StepServiceAccountMatch, checkAccounts, fmt.Sprintf(
			"%s was recorded, but no pull with it was recorded in the last %v (credential expiry): it no longer vouches", saString(v.podSA), m.expiry))
	case v.podSA != nil:
		e.step(StepServiceAccountMatch, checkAccounts, saString(v.podSA)+" was not recorded")
	default:
		e.step(StepServiceAccountMatch, checkAccounts, "the pod uses no service account credentials")
	}
	// Step 14.
	if len(v.expiredSecrets) > 0 || v.expiredServiceAccount {
		e.decided(StepNoMatch, "result", "the pod's matching credentials have expired: it must pull with them again",
			"matching credentials expired")
		return
	}
	e.decided(StepNoMatch, "result", "no recorded credential matches the pod's", "no matching credentials")
}

// What the steps check, as shown in an explanation.
const (
	checkPresent      = "image present on the node"
	checkRecord       = "pulled record for the imageRef"
	checkIntent       = "pull intent for the image string"
	checkFailSafe     = "fail safe"
	checkPolicy       = "credential verification policy"
	checkRecordExists = "pulled record exists"
	checkName         = "credential mapping key"
	checkPodCreds     = "pod credentials (looked up only now)"
	checkSecrets      = "pod secrets against recorded secrets"
	checkAccounts     = "pod service account against recorded ones"
)

// step adds a step taken.
func (e *Explanation) step(n Step, check, finding string) {
	e.Steps = append(e.Steps, ExplainStep{Number: int(n), Check: check, Finding: finding})
}

// decided adds the step that answers and names its rule.
func (e *Explanation) decided(n Step, check, finding, rule string) {
	e.step(n, check, finding)
	e.Rule = rule
}

// tellRecordsError adds steps 3 and 4 for a record or intent that could not
// be read.
func (e *Explanation) tellRecordsError(err error, intent bool) {
	if intent {
		e.step(stepRecordLookup, checkIntent, "cannot be read: "+err.Error())
		e.decided(StepRecordsError, checkFailSafe, "an intent that cannot be read never grants access", "intent unreadable: fail safe")
		return
	}
	e.step(stepRecordLookup, checkRecord, "cannot be read: "+err.Error())
	e.decided(StepRecordsError, checkFailSafe, "a record that cannot be read never grants access", "record unreadable: fail safe")
}

// lookupFinding is what step 3 found: the record, an in-flight pull or a
// stored intent, and so whether the image counts as pulled by the kubelet.
func lookupFinding(image string, v *verdict) string {
	switch {
	case v.found && v.pulledByKubelet && !v.inFlight && !v.intent:
		finding := "found (last updated " + v.rec.LastUpdatedTime.UTC().Format("2006-01-02T15:04:05Z") + "): pulled by the kubelet"
		if v.reread {
			finding = "read again as a pull finished meanwhile: " + finding
		}
		return finding
	case v.inFlight:
		return recordFinding(v.found) + ", but a pull of " + strconv.Quote(image) + " is in flight in this process: pulled by the kubelet"
	case v.intent:
		return recordFinding(v.found) + ", but a pull intent for " + strconv.Quote(image) +
			" is on record (a pull that never finished): pulled by the kubelet"
	default:
		return recordFinding(v.found) + ", and no pull intent for " + strconv.Quote(image) + ": not pulled by the kubelet (preloaded)"
	}
}

// recordFinding describes a record that does not count as "pulled by the
// kubelet".
func recordFinding(found bool) string {
	if found {
		return "found, but with no credentials for this image name (preloaded image protection)"
	}
	return "none"
}

// policyName is the policy's String, or "the policy".
func policyName(p ImagePullPolicyEnforcer) string {
	if s, ok := p.(fmt.Stringer); ok {
		return s.String()
	}
	return "the policy"
}

// tellPolicy adds step 5: whether the policy requires verification.
func (e *Explanation) tellPolicy(p ImagePullPolicyEnforcer, required bool) {
	name := policyName(p)
	if required {
		e.step(StepPolicy, checkPolicy, name+" requires verification")
		return
	}
	rule := "the policy exempts the image"
	if _, ok := p.(fmt.Stringer); ok {
		rule = "policy " + name + " exempts the image"
	}
	e.decided(StepPolicy, checkPolicy, name+" does not require verification here", rule)
}

// tellEntry adds step 8: the record's entry for the mapping key, if any.
func (e *Explanation) tellEntry(key string, rec *accessor.ImagePulledRecord, entry accessor.ImagePullCredentials, ok bool) {
	check := "credentials recorded for " + key
	switch {
	case !ok && len(rec.CredentialMapping) == 0:
		e.decided(StepNoMappingEntry, check, "none: the record is tracked without credentials, re-verify",
			"no credentials recorded for this name")
	case !ok:
		e.decided(StepNoMappingEntry, check,
			fmt.Sprintf("none: the content was pulled only under other names (%d)", len(rec.CredentialMapping)),
			"no credentials recorded for this name")
	default:
		e.step(StepNoMappingEntry, check, fmt.Sprintf("%d secret(s), %d service account(s), node-wide %t",
			len(entry.KubernetesSecrets), len(entry.KubernetesServiceAccounts), entry.NodePodsAccessible))
	}
}

// tellHashMatch explains a pod secret whose hash equals the cached secret
// cs's; write says whether the check writes the pod secret.
func (m *PullManager) tellHashMatch(e *Explanation, rec *accessor.ImagePulledRecord, key string, cs, ps *accessor.ImagePullSecret, write bool) {
	if write && m.wouldChange(rec, key, ps) {
		e.WouldRecord = secretRef(ps)
		e.decided(StepSecretMatch, checkSecrets,
			"secret "+secretString(ps)+" holds the same credential as recorded secret "+secretString(cs)+
				": accepted, the manager records "+secretString(ps)+" too",
			"same credential under other secret coordinates")
		return
	}
	e.decided(StepSecretMatch, checkSecrets, "secret "+secretString(ps)+" holds a recorded credential hash",
		"matching secret and credential hash")
}

// tellCoordinatesMatch explains a pod secret with a cached secret's
// coordinates, accepted below the limit; the check writes it.
func (m *PullManager) tellCoordinatesMatch(e *Explanation, rec *accessor.ImagePulledRecord, key string, ps *accessor.ImagePullSecret) {
	if !m.wouldChange(rec, key, ps) {
		e.decided(StepSecretMatch, checkSecrets, "secret "+secretString(ps)+" matches recorded coordinates (both hashes empty)",
			"same secret coordinates, empty hashes")
		return
	}
	e.WouldRecord = secretRef(ps)
	e.decided(StepSecretMatch, checkSecrets,
		"secret "+secretString(ps)+" matches recorded coordinates with a new credential hash (rotated): trusted, the manager stores the new hash",
		"same secret coordinates, rotated credential")
}

// wouldChange reports whether adding ps to rec's entry for key would change
// the record, that is whether the check would write it.
func (m *PullManager) wouldChange(rec *accessor.ImagePulledRecord, key string, ps *accessor.ImagePullSecret) bool {
	creds := &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{*ps}}
	_, changed := mergeCredentials(rec, key, creds, m.clock.Now())
	return changed
}

func secretRef(s *accessor.ImagePullSecret) *SecretRef {
	return &SecretRef{UID: s.UID, Namespace: s.Namespace, Name: s.Name}
}

// secretString names a secret by its coordinates, never its hash.
func secretString(s *accessor.ImagePullSecret) string {
	return s.Namespace + "/" + s.Name + " (uid " + s.UID + ")"
}

func saString(sa *accessor.ImagePullServiceAccount) string {
	if sa == nil {
		return "none"
	}
	return sa.Namespace + "/" + sa.Name + " (uid " + sa.UID + ")"
}

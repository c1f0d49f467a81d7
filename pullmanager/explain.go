package pullmanager

import (
	"context"
	"fmt"
	"strconv"

	"github.com/pullrecords/pullrecords/accessor"
)

// Explanation tells how MustAttemptImagePull answers for one pod and image,
// step by step. It is made by ExplainImagePull from the same code as the
// check itself. It never holds a credential hash.
type Explanation struct {
	// Image and ImageRef are the arguments explained.
	Image    string
	ImageRef string
	// MustPull is the answer: true means the pod must prove its credentials
	// to the registry.
	MustPull bool
	// Err is the error MustAttemptImagePull returns: only a failure of
	// getPodCredentials (Step is StepPodCredentials).
	Err error
	// FailSafeErr is the error that forced a fail-safe "must pull" without
	// being returned by the check: a record or intent that could not be read
	// (StepRecordsError) or an image string that does not parse
	// (StepNameParse).
	FailSafeErr error
	// Result is the check's label in the mustpull_checks metric (one of the
	// Result constants); empty when the image is not present, where no check
	// is counted.
	Result string
	// Step is the number of the step of the decision order that answered
	// (one of the Step constants).
	Step int
	// Rule names the rule that answered, in a few words.
	Rule string
	// PulledByKubelet is what the policy was told.
	PulledByKubelet bool
	// CredentialsLookedUp says whether the pod's credentials were asked for
	// (they are, lazily, only when a decision needs them).
	CredentialsLookedUp bool
	// WouldRecord is the pod secret the check would add to the record (or
	// whose new hash it would store), if any. The explanation does not
	// write it.
	WouldRecord *SecretRef
	// Steps are the steps taken, in order; the last one answered.
	Steps []ExplainStep
}

// ExplainStep is one step taken by a decision.
type ExplainStep struct {
	// Number is the step's number in the decision order (1-14).
	Number int
	// Check says what the step looks at.
	Check string
	// Finding says what it found.
	Finding string
}

// SecretRef names a secret without its credential hash.
type SecretRef struct {
	UID       string
	Namespace string
	Name      string
}

// ExplainImagePull answers as MustAttemptImagePull would at this moment,
// and tells how. It runs the same decision code in a dry-run mode: it never
// writes (where the check would add the pod's secret to the record, it sets
// WouldRecord instead), never logs and counts no metrics. It sees what the
// check sees: the records, this manager's in-flight pulls, its policy and
// its options (WithPreloadedImageProtection). getPodCredentials is called
// when, and only when, the check would call it.
//
// A manager built for explanations only can be made over a read-only store
// with a nil ImageLister: NewImagePullManager then writes nothing.
func (m *PullManager) ExplainImagePull(ctx context.Context, image, imageRef string, getPodCredentials GetPodCredentials) Explanation {
	e := Explanation{Image: image, ImageRef: imageRef, Steps: make([]ExplainStep, 0, 12)}
	v := m.decide(ctx, image, imageRef, getPodCredentials, true, &e)
	e.MustPull, e.Err, e.Step = v.mustPull, v.err, int(v.step)
	if v.step != StepImageNotPresent {
		e.Result = resultLabels[v.result]
	}
	return e
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

// The methods below fill an explanation while decide runs; decide calls
// them only when it has one.

func (e *Explanation) step(n int, check, finding string) {
	e.Steps = append(e.Steps, ExplainStep{Number: n, Check: check, Finding: finding})
}

// decided adds the step that answers and names its rule.
func (e *Explanation) decided(n int, check, finding, rule string) {
	e.step(n, check, finding)
	e.Rule = rule
}

func (e *Explanation) traceNotPresent() {
	e.decided(StepImageNotPresent, checkPresent, "no: there is nothing to reuse", "image not present")
}

func (e *Explanation) traceRecordsError(err error, intent bool) {
	e.FailSafeErr = err
	if intent {
		e.step(stepRecordLookup, checkIntent, "cannot be read: "+err.Error())
		e.decided(StepRecordsError, checkFailSafe, "an intent that cannot be read never grants access", "intent unreadable: fail safe")
		return
	}
	e.step(stepRecordLookup, checkRecord, "cannot be read: "+err.Error())
	e.decided(StepRecordsError, checkFailSafe, "a record that cannot be read never grants access", "record unreadable: fail safe")
}

func (e *Explanation) traceLookup(image string, rec *accessor.ImagePulledRecord, found, pulledByKubelet, inFlight, intent, reread bool) {
	e.PulledByKubelet = pulledByKubelet
	var finding string
	switch {
	case found && pulledByKubelet && !inFlight && !intent:
		finding = "found (last updated " + rec.LastUpdatedTime.UTC().Format("2006-01-02T15:04:05Z") + "): pulled by the kubelet"
		if reread {
			finding = "read again as a pull finished meanwhile: " + finding
		}
	case inFlight:
		finding = recordFinding(found) + ", but a pull of " + strconv.Quote(image) + " is in flight in this process: pulled by the kubelet"
	case intent:
		finding = recordFinding(found) + ", but a pull intent for " + strconv.Quote(image) +
			" is on record (a pull that never finished): pulled by the kubelet"
	default:
		finding = recordFinding(found) + ", and no pull intent for " + strconv.Quote(image) + ": not pulled by the kubelet (preloaded)"
	}
	e.step(stepRecordLookup, checkRecord, finding)
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

func (e *Explanation) tracePolicy(p ImagePullPolicyEnforcer, required bool) {
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

func (e *Explanation) traceNameError(image string, err error) {
	e.FailSafeErr = err
	e.decided(StepNameParse, checkName, fmt.Sprintf("cannot parse %q: %v", image, err), "image name does not parse: fail safe")
}

func (e *Explanation) traceEntry(key string, rec *accessor.ImagePulledRecord, entry accessor.ImagePullCredentials, ok bool) {
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

func (e *Explanation) tracePodCredentials(secrets []accessor.ImagePullSecret, sa *accessor.ImagePullServiceAccount, err error) {
	e.CredentialsLookedUp = true
	if err != nil {
		e.decided(StepPodCredentials, checkPodCreds, "cannot be looked up: "+err.Error(), "pod credentials unavailable: fail safe")
		return
	}
	e.step(StepPodCredentials, checkPodCreds, fmt.Sprintf("%d secret(s), service account %s", len(secrets), saString(sa)))
}

// traceHashMatch explains a pod secret whose hash equals the cached secret
// cs's; write says whether the check writes the pod secret.
func (m *PullManager) traceHashMatch(e *Explanation, rec *accessor.ImagePulledRecord, key string, cs, ps *accessor.ImagePullSecret, write bool) {
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

// traceCoordinatesMatch explains a pod secret with a cached secret's
// coordinates, accepted below the limit; the check writes it.
func (m *PullManager) traceCoordinatesMatch(e *Explanation, rec *accessor.ImagePulledRecord, key string, ps *accessor.ImagePullSecret) {
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

func (e *Explanation) traceCoordinatesAtLimit(ps *accessor.ImagePullSecret, cached int) {
	e.step(StepSecretMatch, checkSecrets, fmt.Sprintf(
		"secret %s matches recorded coordinates, but %d secrets are recorded (limit %d): not trusted without a hash match",
		secretString(ps), cached, writeRecordWhileMatchingLimit))
}

func (e *Explanation) traceNoSecretMatch(podSecrets int) {
	if podSecrets == 0 {
		e.step(StepSecretMatch, checkSecrets, "the pod has no pull secrets")
		return
	}
	e.step(StepSecretMatch, checkSecrets, "no pod secret matches a recorded secret or its credential")
}

func (e *Explanation) traceServiceAccount(sa *accessor.ImagePullServiceAccount, matched bool) {
	switch {
	case matched:
		e.decided(StepServiceAccountMatch, checkAccounts, saString(sa)+" was recorded", "matching service account")
	case sa != nil:
		e.step(StepServiceAccountMatch, checkAccounts, saString(sa)+" was not recorded")
	default:
		e.step(StepServiceAccountMatch, checkAccounts, "the pod uses no service account credentials")
	}
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

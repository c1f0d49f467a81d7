package explain

import (
	"fmt"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// Result labels, the same words as the manager's mustpull_checks metric.
const (
	ResultNotPresent       = "imageNotPresent"
	ResultPolicyAllowed    = "credentialPolicyAllowed"
	ResultRecordFound      = "credentialRecordFound"
	ResultMustAuthenticate = "mustAuthenticate"
	ResultError            = "error"
)

// secretWriteLimit is the number of cached secrets per image name at or above
// which a check no longer adds secrets to a record.
const secretWriteLimit = 100

// Pod holds the credentials a pod presents.
type Pod struct {
	Secrets        []accessor.ImagePullSecret
	ServiceAccount *accessor.ImagePullServiceAccount
}

// Options say which policy and helpers to explain with.
type Options struct {
	// Policy is the credential verification policy. Required.
	Policy pullmanager.ImagePullPolicyEnforcer
	// PolicyName is shown in the explanation.
	PolicyName string
	// Normalize turns a pod image string into the credential mapping key.
	// Required.
	Normalize func(image string) (string, error)
	// ProtectPreloaded mirrors pullmanager.WithPreloadedImageProtection
	// (the fix for kubernetes#138175): a record counts as "pulled by the
	// kubelet" only if it maps credentials for the image's normalised name.
	ProtectPreloaded bool
	// InFlight reports the manager's in-memory count of in-flight pulls of
	// image is above zero. Nil means no manager process is known (zero).
	InFlight func(image string) bool
}

// Step is one step of the decision.
type Step struct {
	// Number is the step's number in the decision order (1-14).
	Number int `json:"step"`
	// Check says what the step looks at.
	Check string `json:"check"`
	// Finding says what it found.
	Finding string `json:"finding"`
}

// Explanation is the decision and how it was reached.
type Explanation struct {
	Image    string `json:"image"`
	ImageRef string `json:"imageRef"`
	Policy   string `json:"policy,omitempty"`
	// MustPull is the answer: true means the pod must prove its credentials
	// to the registry.
	MustPull bool `json:"mustPull"`
	// Result is the metric label of the answer.
	Result string `json:"result"`
	// DecidedAt is the number of the step that answered.
	DecidedAt int `json:"decidedAt"`
	// Rule names the rule that answered, in a few words.
	Rule string `json:"rule"`
	// PulledByKubelet is what the policy was told.
	PulledByKubelet bool `json:"pulledByKubelet"`
	// CredentialsLookedUp says whether the manager would ask for the pod's
	// credentials (it does so lazily, only when needed).
	CredentialsLookedUp bool `json:"credentialsLookedUp"`
	// WouldRecord is the secret the manager would add to the record, or
	// whose hash it would update, during the check, if any.
	WouldRecord *SecretRef `json:"wouldRecord,omitempty"`
	// Steps are the steps taken, in order.
	Steps []Step `json:"steps"`
	// Err is the store error that forced a fail-safe answer, if any.
	Err string `json:"error,omitempty"`
}

type builder struct {
	e Explanation
}

func (b *builder) step(n int, check, format string, args ...any) {
	b.e.Steps = append(b.e.Steps, Step{Number: n, Check: check, Finding: fmt.Sprintf(format, args...)})
}

func (b *builder) decide(n int, mustPull bool, result, rule string) Explanation {
	b.e.DecidedAt = n
	b.e.MustPull = mustPull
	b.e.Result = result
	b.e.Rule = rule
	return b.e
}

// Explain explains MustAttemptImagePull(image, imageRef) for a pod with the
// given credentials, reading records only.
func Explain(records accessor.PullRecordsAccessor, opts Options, image, imageRef string, pod Pod) Explanation {
	b := &builder{e: Explanation{Image: image, ImageRef: imageRef, Policy: opts.PolicyName}}

	// 1: presence.
	if imageRef == "" {
		b.step(1, "image present on the node", "no: there is nothing to reuse")
		return b.decide(1, true, ResultNotPresent, "image not present")
	}
	b.step(1, "image present on the node", "yes, as %s", imageRef)

	// 3: record and intent lookup.
	rec, exists, err := records.GetImagePulledRecord(imageRef)
	if err != nil {
		b.e.Err = err.Error()
		b.step(3, "pulled record for the imageRef", "cannot be read: %v", err)
		b.step(4, "fail safe", "a record that cannot be read never grants access")
		return b.decide(4, true, ResultError, "record unreadable: fail safe")
	}
	countsAsPulled := exists
	if exists && opts.ProtectPreloaded {
		if name, err := opts.Normalize(image); err == nil {
			_, countsAsPulled = rec.CredentialMapping[name]
		}
	}
	switch {
	case countsAsPulled:
		b.e.PulledByKubelet = true
		b.step(3, "pulled record for the imageRef", "found (last updated %s): pulled by the kubelet",
			rec.LastUpdatedTime.UTC().Format("2006-01-02T15:04:05Z"))
	case opts.InFlight != nil && opts.InFlight(image):
		b.e.PulledByKubelet = true
		b.step(3, "pulled record for the imageRef", "%s, but a pull of %q is in flight in this process: pulled by the kubelet", recordFinding(exists), image)
	default:
		intent, err := records.ImagePullIntentExists(image)
		if err != nil {
			b.e.Err = err.Error()
			b.step(3, "pull intent for the image string", "cannot be read: %v", err)
			b.step(4, "fail safe", "an intent that cannot be read never grants access")
			return b.decide(4, true, ResultError, "intent unreadable: fail safe")
		}
		if intent {
			b.e.PulledByKubelet = true
			b.step(3, "pulled record for the imageRef", "%s, but a pull intent for %q is on record (a pull that never finished): pulled by the kubelet", recordFinding(exists), image)
		} else {
			b.step(3, "pulled record for the imageRef", "%s, and no pull intent for %q: not pulled by the kubelet (preloaded)", recordFinding(exists), image)
		}
	}

	// 5: policy.
	if !opts.Policy.RequireCredentialVerificationForImage(image, b.e.PulledByKubelet) {
		b.step(5, "credential verification policy", "%s does not require verification here", policyName(opts))
		return b.decide(5, false, ResultPolicyAllowed, "policy "+policyName(opts)+" exempts the image")
	}
	b.step(5, "credential verification policy", "%s requires verification", policyName(opts))

	// 6: a record is needed from here on.
	if !exists {
		b.step(6, "pulled record exists", "no: nothing proves any credentials")
		return b.decide(6, true, ResultMustAuthenticate, "no pulled record")
	}
	b.step(6, "pulled record exists", "yes")

	// 7: mapping key.
	name, err := opts.Normalize(image)
	if err != nil {
		b.e.Err = err.Error()
		b.step(7, "normalised image name", "cannot parse %q: %v", image, err)
		return b.decide(7, true, ResultError, "image name does not parse: fail safe")
	}
	b.step(7, "normalised image name", "%s", name)

	// 8: mapping entry.
	entry, ok := rec.CredentialMapping[name]
	if !ok {
		if len(rec.CredentialMapping) == 0 {
			b.step(8, "credentials recorded for "+name, "none: the record is tracked without credentials, re-verify")
		} else {
			b.step(8, "credentials recorded for "+name, "none: the content was pulled only under other names (%d)", len(rec.CredentialMapping))
		}
		return b.decide(8, true, ResultMustAuthenticate, "no credentials recorded for this name")
	}
	b.step(8, "credentials recorded for "+name, "%d secret(s), %d service account(s), node-wide %t",
		len(entry.KubernetesSecrets), len(entry.KubernetesServiceAccounts), entry.NodePodsAccessible)

	// 9: node-wide.
	if entry.NodePodsAccessible {
		b.step(9, "node-wide access", "yes: pulled anonymously or with node credentials, every pod may use it")
		return b.decide(9, false, ResultRecordFound, "node-wide access (anonymous or node credentials)")
	}

	// 10: anything to match against?
	if len(entry.KubernetesSecrets) == 0 && len(entry.KubernetesServiceAccounts) == 0 {
		b.step(10, "recorded secrets or service accounts", "none")
		return b.decide(10, true, ResultMustAuthenticate, "nothing recorded to match")
	}

	// 11: lazy credential lookup.
	b.e.CredentialsLookedUp = true
	b.step(11, "pod credentials (looked up only now)", "%d secret(s), service account %s", len(pod.Secrets), saString(pod.ServiceAccount))

	// 12: secrets.
	cached := entry.KubernetesSecrets
	for _, ps := range pod.Secrets {
		for _, cs := range cached {
			hashesMatch := cs.CredentialHash != "" && cs.CredentialHash == ps.CredentialHash
			coordsMatch := cs.UID == ps.UID && cs.Namespace == ps.Namespace && cs.Name == ps.Name
			if hashesMatch {
				if !coordsMatch && len(cached) < secretWriteLimit {
					b.e.WouldRecord = redacted(ps)
					b.step(12, "pod secrets against recorded secrets",
						"secret %s holds the same credential as recorded secret %s: accepted, the manager records %s too",
						secretString(ps), secretString(cs), secretString(ps))
					return b.decide(12, false, ResultRecordFound, "same credential under other secret coordinates")
				}
				b.step(12, "pod secrets against recorded secrets", "secret %s holds a recorded credential hash", secretString(ps))
				return b.decide(12, false, ResultRecordFound, "matching secret and credential hash")
			}
			if coordsMatch {
				if len(cached) < secretWriteLimit {
					if ps.CredentialHash == cs.CredentialHash {
						b.step(12, "pod secrets against recorded secrets",
							"secret %s matches recorded coordinates (both hashes empty)", secretString(ps))
						return b.decide(12, false, ResultRecordFound, "same secret coordinates, empty hashes")
					}
					b.step(12, "pod secrets against recorded secrets",
						"secret %s matches recorded coordinates with a new credential hash (rotated): trusted, the manager stores the new hash",
						secretString(ps))
					b.e.WouldRecord = redacted(ps)
					return b.decide(12, false, ResultRecordFound, "same secret coordinates, rotated credential")
				}
				b.step(12, "pod secrets against recorded secrets",
					"secret %s matches recorded coordinates, but %d secrets are recorded (limit %d): not trusted without a hash match",
					secretString(ps), len(cached), secretWriteLimit)
			}
		}
	}
	if len(pod.Secrets) == 0 {
		b.step(12, "pod secrets against recorded secrets", "the pod has no pull secrets")
	} else {
		b.step(12, "pod secrets against recorded secrets", "no pod secret matches a recorded secret or its credential")
	}

	// 13: service account.
	if sa := pod.ServiceAccount; sa != nil {
		for _, rs := range entry.KubernetesServiceAccounts {
			if rs == *sa {
				b.step(13, "pod service account against recorded ones", "%s was recorded", saString(sa))
				return b.decide(13, false, ResultRecordFound, "matching service account")
			}
		}
		b.step(13, "pod service account against recorded ones", "%s was not recorded", saString(sa))
	} else {
		b.step(13, "pod service account against recorded ones", "the pod uses no service account credentials")
	}

	// 14: nothing matched.
	b.step(14, "result", "no recorded credential matches the pod's")
	return b.decide(14, true, ResultMustAuthenticate, "no matching credentials")
}

// recordFinding describes a record that does not count as "pulled by the
// kubelet".
func recordFinding(exists bool) string {
	if exists {
		return "found, but with no credentials for this image name (preloaded image protection)"
	}
	return "none"
}

func policyName(o Options) string {
	if o.PolicyName == "" {
		return "the policy"
	}
	return o.PolicyName
}

// SecretRef names a secret without its credential hash.
type SecretRef struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func redacted(s accessor.ImagePullSecret) *SecretRef {
	return &SecretRef{UID: s.UID, Namespace: s.Namespace, Name: s.Name}
}

// RedactHash returns a form of a credential hash that tells two hashes apart
// without disclosing them.
func RedactHash(h string) string {
	if h == "" {
		return ""
	}
	if len(h) > 8 {
		return h[:8] + "…"
	}
	return "…"
}

func secretString(s accessor.ImagePullSecret) string {
	return s.Namespace + "/" + s.Name + " (uid " + s.UID + ")"
}

func saString(sa *accessor.ImagePullServiceAccount) string {
	if sa == nil {
		return "none"
	}
	return sa.Namespace + "/" + sa.Name + " (uid " + sa.UID + ")"
}

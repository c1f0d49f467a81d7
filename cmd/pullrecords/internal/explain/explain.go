package explain

import (
	"context"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// Result labels: the manager's mustpull_checks metric labels, plus
// ResultNotPresent for an image that is not on the node (no check counted).
const (
	ResultNotPresent       = "imageNotPresent"
	ResultPolicyAllowed    = pullmanager.ResultCredentialPolicyAllowed
	ResultRecordFound      = pullmanager.ResultCredentialRecordFound
	ResultMustAuthenticate = pullmanager.ResultMustAuthenticate
	ResultError            = pullmanager.ResultError
)

// Pod holds the credentials a pod presents.
type Pod struct {
	Secrets        []accessor.ImagePullSecret
	ServiceAccount *accessor.ImagePullServiceAccount
}

// credentials returns the pod's credentials as the manager asks for them.
func (p Pod) credentials() pullmanager.GetPodCredentials {
	return func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return p.Secrets, p.ServiceAccount, nil
	}
}

// Options say which policy and manager options to explain with.
type Options struct {
	// Policy is the credential verification policy. Required.
	Policy pullmanager.ImagePullPolicyEnforcer
	// PolicyName is shown in the explanation.
	PolicyName string
	// ProtectPreloaded is pullmanager.WithPreloadedImageProtection (the fix
	// for kubernetes#138175).
	ProtectPreloaded bool
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

// Explanation is the decision and how it was reached, as the command prints
// it.
type Explanation struct {
	Image    string `json:"image"`
	ImageRef string `json:"imageRef"`
	Policy   string `json:"policy,omitempty"`
	// MustPull is the answer: true means the pod must prove its credentials
	// to the registry.
	MustPull bool `json:"mustPull"`
	// Result is the metric label of the answer, or ResultNotPresent.
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
	// Err is the error that forced a fail-safe answer (a record that cannot
	// be read, an image name that does not parse), if any.
	Err string `json:"error,omitempty"`
	// UnknownHashes are the pod secrets given without a credential hash
	// (namespace/name/uid): they can match recorded secrets by their
	// coordinates only, never by their credential.
	UnknownHashes []SecretRef `json:"unknownHashes,omitempty"`
	// HashUnknownMayMatter says that the answer could be "may use" for one
	// of UnknownHashes: the decision found no match, and that secret's
	// credential could equal a recorded one (step 12's match by hash).
	HashUnknownMayMatter bool `json:"hashUnknownMayMatter,omitempty"`
}

// SecretRef names a secret without its credential hash.
type SecretRef struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Explain explains MustAttemptImagePull(image, imageRef) for a pod with the
// given credentials. It builds a pull manager over records with opts and no
// image lister (so no start-up recovery and no write: records may be a
// read-only store) and asks it. ctx carries the logger. The only error is a
// missing policy or store.
func Explain(ctx context.Context, records accessor.PullRecordsAccessor, opts Options, image, imageRef string, pod Pod) (Explanation, error) {
	m, err := pullmanager.NewImagePullManager(ctx, records, opts.Policy, nil,
		pullmanager.WithPreloadedImageProtection(opts.ProtectPreloaded))
	if err != nil {
		return Explanation{}, err
	}
	e := FromManager(m.ExplainImagePull(ctx, image, imageRef, pod.credentials()), opts.PolicyName)
	e.unknownHashes(pod)
	return e, nil
}

// managerRotatedRule is the manager's rule for a pod secret that matches a
// recorded secret's coordinates with another hash. TestUnknownHash holds it
// to the manager's wording.
const managerRotatedRule = "same secret coordinates, rotated credential"

// Rule and finding for a pod secret given without its hash that matches a
// recorded secret's coordinates.
const (
	RuleUnknownHash = "same secret coordinates, hash not given"
	findingUnknown  = "matches recorded coordinates; its credential hash was not given (unknown hash): " +
		"the manager trusts these coordinates whatever the hash, and stores the pod's hash if it is new"
)

// unknownHashes accounts for the pod secrets given without a credential
// hash. The manager sees an empty hash, which differs from every recorded
// hash: it would call a coordinates match a rotated credential and record
// the empty hash. The truth is that the hash is unknown: the coordinates
// decide, and whether the manager would store a new hash is not known. And
// where nothing matched, the secret's credential could still have matched a
// recorded one under other coordinates.
func (e *Explanation) unknownHashes(pod Pod) {
	hashless := map[SecretRef]bool{}
	for _, s := range pod.Secrets {
		if s.CredentialHash == "" {
			r := SecretRef{UID: s.UID, Namespace: s.Namespace, Name: s.Name}
			if !hashless[r] {
				e.UnknownHashes = append(e.UnknownHashes, r)
			}
			hashless[r] = true
		}
	}
	if len(hashless) == 0 || !e.CredentialsLookedUp {
		return
	}
	switch {
	case e.DecidedAt == pullmanager.StepSecretMatch && e.Rule == managerRotatedRule &&
		e.WouldRecord != nil && hashless[*e.WouldRecord] && len(e.Steps) > 0:
		r := e.WouldRecord
		e.Rule = RuleUnknownHash
		last := &e.Steps[len(e.Steps)-1]
		last.Finding = "secret " + r.Namespace + "/" + r.Name + " (uid " + r.UID + ") " + findingUnknown
		e.WouldRecord = nil
	case e.MustPull && e.DecidedAt == pullmanager.StepNoMatch:
		e.HashUnknownMayMatter = true
	}
}

// FromManager turns the manager's explanation into the command's form.
func FromManager(e pullmanager.Explanation, policyName string) Explanation {
	out := Explanation{
		Image:               e.Image,
		ImageRef:            e.ImageRef,
		Policy:              policyName,
		MustPull:            e.MustPull,
		Result:              e.Result,
		DecidedAt:           e.Step,
		Rule:                e.Rule,
		PulledByKubelet:     e.PulledByKubelet,
		CredentialsLookedUp: e.CredentialsLookedUp,
		Steps:               make([]Step, 0, len(e.Steps)),
	}
	if e.Step == pullmanager.StepImageNotPresent {
		out.Result = ResultNotPresent
	}
	if r := e.WouldRecord; r != nil {
		out.WouldRecord = &SecretRef{UID: r.UID, Namespace: r.Namespace, Name: r.Name}
	}
	for _, s := range e.Steps {
		out.Steps = append(out.Steps, Step{Number: s.Number, Check: s.Check, Finding: s.Finding})
	}
	switch {
	case e.FailSafeErr != nil:
		out.Err = e.FailSafeErr.Error()
	case e.Err != nil:
		out.Err = e.Err.Error()
	}
	return out
}

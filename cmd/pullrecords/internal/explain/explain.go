package explain

import (
	"context"
	"time"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
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
	// PolicyName, when not empty, is shown as the policy's name instead of
	// the policy's own (its String method).
	PolicyName string
	// ProtectPreloaded is pullmanager.WithPreloadedImageProtection (the fix
	// for kubernetes#138175).
	ProtectPreloaded bool
	// CredentialExpiry, when above zero, explains with
	// pullmanager.WithCredentialExpiry over Proofs (a store opened
	// read-only, credstamp.OpenReadOnly), as a kubelet with the
	// credentialExpiry switch decides.
	CredentialExpiry time.Duration
	Proofs           *credstamp.Store
}

// Explanation is the manager's explanation as the command prints it:
// pullmanager.Explanation in its own JSON form, with Result set to
// ResultNotPresent where the manager counts no check and Policy set to
// Options.PolicyName when given, followed by what the command adds about pod
// secrets given without their credential hash.
type Explanation struct {
	pullmanager.Explanation
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
type SecretRef = pullmanager.SecretRef

// Explain explains MustAttemptImagePull(image, imageRef) for a pod with the
// given credentials. It builds a pull manager over records with opts and no
// image lister (so no start-up recovery and no write: records may be a
// read-only store) and asks it. ctx carries the logger. The only error is a
// missing policy or store.
func Explain(ctx context.Context, records accessor.PullRecordsAccessor, opts Options, image, imageRef string, pod Pod) (Explanation, error) {
	m, err := pullmanager.NewImagePullManager(ctx, records, opts.Policy, nil,
		pullmanager.WithPreloadedImageProtection(opts.ProtectPreloaded),
		pullmanager.WithCredentialExpiry(opts.CredentialExpiry, opts.Proofs))
	if err != nil {
		return Explanation{}, err
	}
	e := Explanation{Explanation: m.ExplainImagePull(ctx, image, imageRef, pod.credentials())}
	if e.DecidedAt == pullmanager.StepImageNotPresent {
		e.Result = ResultNotPresent
	}
	if opts.PolicyName != "" {
		e.Policy = opts.PolicyName
	}
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

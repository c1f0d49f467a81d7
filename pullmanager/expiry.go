package pullmanager

import (
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/credstamp"
)

// Credential expiry (WithCredentialExpiry). The kubelet's records say which
// credentials pulled an image, never when; so a credential that pulled an
// image once vouches for it for as long as the record lives, also after the
// registry revoked it. With expiry on, a recorded secret or service account
// vouches only while its proof is fresh: a stamp, kept in a credstamp.Store
// beside (never inside) the records directory, of the last successful pull
// made with it. Expiry only ever turns a "may use" into a "must pull": the
// records themselves are read, written and merged exactly as without it,
// and nothing is ever deleted because it expired.

// WithCredentialExpiry turns on credential expiry (default off, as
// upstream): a pod secret or service account matched in a record vouches
// for the image only if a pull made with that credential, of that imageRef
// under that mapping key, was recorded (RecordImagePulled) less than ttl
// ago by stamps' clock; otherwise the check goes on as if it had not
// matched, and ends in "must pull" unless something else vouches. A
// successful pull renews the proof of every credential it was recorded
// with. Node-wide entries (anonymous pulls, node credentials) do not expire:
// every pod may use them anyway.
//
// The proofs live in stamps, which the caller opens (credstamp.Open) in a
// directory of its own, outside the kubelet's image_manager directory, so
// the record files stay byte for byte what the kubelet writes, and closes
// after the manager. A missing, corrupt or future-dated proof counts as
// expired: turning expiry on over records written without it makes every
// recorded credential prove itself once more, and losing the stamps costs
// pulls, never access. stamps' clock should be the manager's (WithClock).
//
// WithCredentialExpiry(0, nil) is off, as without the option; a ttl above
// zero with a nil store, or a store with a ttl of zero or less, is invalid
// (ErrInvalidOption).
func WithCredentialExpiry(ttl time.Duration, stamps *credstamp.Store) Option {
	return func(o *options) { o.expiry, o.stamps = ttl, stamps }
}

// Words that start the Credential of a proof's key, so that the proofs of a
// secret's content and of a service account never share a key.
const (
	proofOfSecret         = "secret:"
	proofOfSecretObject   = "secret-object:"
	proofOfServiceAccount = "serviceaccount:"
)

// secretProof is the key of the proof of recorded secret s for imageRef
// under mapping key: its credential hash, which is what a pull proved (the
// same content under other coordinates is the same credential); for a
// secret recorded without a hash, its coordinates.
func secretProof(imageRef, key string, s *accessor.ImagePullSecret) credstamp.Key {
	cred := proofOfSecret + s.CredentialHash
	if s.CredentialHash == "" {
		cred = proofOfSecretObject + s.Namespace + "/" + s.Name + "/" + s.UID
	}
	return credstamp.Key{Credential: cred, Repository: key, Digest: imageRef}
}

// serviceAccountProof is the key of the proof of service account sa.
func serviceAccountProof(imageRef, key string, sa *accessor.ImagePullServiceAccount) credstamp.Key {
	return credstamp.Key{Credential: proofOfServiceAccount + sa.Namespace + "/" + sa.Name + "/" + sa.UID, Repository: key, Digest: imageRef}
}

// expiring reports whether credential expiry is on.
func (m *PullManager) expiring() bool { return m.stamps != nil }

// secretProven reports whether recorded secret s still vouches for imageRef
// under key: always without expiry, else while its proof is fresh.
func (m *PullManager) secretProven(imageRef, key string, s *accessor.ImagePullSecret) bool {
	return !m.expiring() || m.stamps.Fresh(secretProof(imageRef, key, s), m.expiry)
}

// serviceAccountProven is secretProven for a service account.
func (m *PullManager) serviceAccountProven(imageRef, key string, sa *accessor.ImagePullServiceAccount) bool {
	return !m.expiring() || m.stamps.Fresh(serviceAccountProof(imageRef, key, sa), m.expiry)
}

// renewProofs stamps, after a recorded pull of imageRef under key, the
// proof of every credential the pull was made with. A stamp that cannot be
// written is logged: that credential then looks expired, which costs a pull.
func (m *PullManager) renewProofs(logger klog.Logger, imageRef, key string, creds *accessor.ImagePullCredentials) {
	if !m.expiring() || creds == nil {
		return
	}
	for i := range creds.KubernetesSecrets {
		if err := m.stamps.Stamp(secretProof(imageRef, key, &creds.KubernetesSecrets[i])); err != nil {
			logger.Error(err, "Failed to renew a pull credential's proof; pods using it will pull again", "imageRef", imageRef)
		}
	}
	for i := range creds.KubernetesServiceAccounts {
		if err := m.stamps.Stamp(serviceAccountProof(imageRef, key, &creds.KubernetesServiceAccounts[i])); err != nil {
			logger.Error(err, "Failed to renew a pull credential's proof; pods using it will pull again", "imageRef", imageRef)
		}
	}
}

// inheritProof gives pod secret ps, which a check accepted because recorded
// secret cs vouched for it (a rotated secret: same coordinates, another
// credential) and wrote to the record, cs's proof: ps then vouches exactly
// as long as cs would have, not longer, and not less.
func (m *PullManager) inheritProof(logger klog.Logger, imageRef, key string, cs, ps *accessor.ImagePullSecret) {
	if !m.expiring() {
		return
	}
	from, to := secretProof(imageRef, key, cs), secretProof(imageRef, key, ps)
	if from == to {
		return
	}
	if err := m.stamps.Inherit(to, from); err != nil {
		logger.Error(err, "Failed to carry a pull credential's proof over to its rotated secret; pods using it will pull again", "imageRef", imageRef)
	}
}

// pruneProofs removes expired proofs (they vouch for nothing) from the
// store, so it does not grow with every image and credential ever seen.
func (m *PullManager) pruneProofs(logger klog.Logger) {
	if !m.expiring() {
		return
	}
	removed, err := m.stamps.Prune(m.expiry)
	if err != nil {
		logger.Error(err, "Failed to prune expired pull credential proofs")
	}
	if removed > 0 {
		logger.V(2).Info("Pruned expired pull credential proofs", "removed", removed)
	}
}

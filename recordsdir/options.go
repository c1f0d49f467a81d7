package recordsdir

import (
	"path/filepath"
	"time"

	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// Option configures Open.
type Option func(*options)

type options struct {
	store   []fsstore.Option
	manager []pullmanager.Option
	expiry  *expiryOptions
}

type expiryOptions struct {
	dir          string
	ttl          time.Duration
	stampOptions []credstamp.Option
}

// CredentialProofsDir is the conventional directory of the credential
// proofs of the records under rootDir: <rootDir>/pullrecords/credential-proofs,
// beside image_manager and never in it. A kubelet built on the library
// keeps them there (kubeletadapter), and the pullrecords command looks
// there.
func CredentialProofsDir(rootDir string) string {
	return filepath.Join(rootDir, "pullrecords", "credential-proofs")
}

// WithCredentialExpiry turns on credential expiry
// (pullmanager.WithCredentialExpiry) with the proofs kept in dir, an
// absolute directory that must not be inside <rootDir>/image_manager (the
// kubelet's files stay exactly the kubelet's): Open opens them
// (credstamp.Open with stampOptions, created 0700 if missing), removes the
// expired ones, and Close closes them. A ttl of zero or less is an error
// from Open matching pullmanager.ErrInvalidOption. stampOptions should
// carry the manager's clock when WithManagerOptions sets one.
func WithCredentialExpiry(dir string, ttl time.Duration, stampOptions ...credstamp.Option) Option {
	return func(o *options) { o.expiry = &expiryOptions{dir: dir, ttl: ttl, stampOptions: stampOptions} }
}

// WithStoreOptions passes opts to fsstore.New, after the options of earlier
// calls.
func WithStoreOptions(opts ...fsstore.Option) Option {
	return func(o *options) { o.store = append(o.store, opts...) }
}

// WithManagerOptions passes opts to pullmanager.NewImagePullManager, after
// the options of earlier calls.
func WithManagerOptions(opts ...pullmanager.Option) Option {
	return func(o *options) { o.manager = append(o.manager, opts...) }
}

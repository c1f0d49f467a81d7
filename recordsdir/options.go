package recordsdir

import (
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// Option configures Open.
type Option func(*options)

type options struct {
	store   []fsstore.Option
	manager []pullmanager.Option
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

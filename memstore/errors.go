package memstore

import "errors"

var (
	// ErrNilDelegate is returned by NewCache when it is given no store to
	// cache.
	ErrNilDelegate = errors.New("nil delegate store")
	// errInvalidOption is returned by NewCache for an option value it cannot
	// use.
	errInvalidOption = errors.New("invalid cache option")
)

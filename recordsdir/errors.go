package recordsdir

import "errors"

// ErrNoRootDir is returned by Open for an empty root directory.
var ErrNoRootDir = errors.New("no records root directory given")

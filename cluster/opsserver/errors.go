package opsserver

import "errors"

// ErrInvalidArgument is returned by Start for a missing gatherer or check.
var ErrInvalidArgument = errors.New("invalid ops server argument")

package main

import (
	"errors"
	"fmt"
)

var (
	// errProblemsFound is returned when a command ran and found problems
	// (fsck). It maps to exit status 1.
	errProblemsFound = errors.New("problems found")
	// errNotFound is returned when what was asked for does not exist (get
	// of a record that is not there). It maps to exit status 1, as
	// kubectl's NotFound.
	errNotFound = errors.New("not found")
	// errUsage wraps bad flags and arguments. It maps to exit status 2.
	errUsage = errors.New("invalid usage")
)

// notFoundError is an error that is errNotFound without saying so.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func (e *notFoundError) Is(target error) bool { return target == errNotFound }

// notFoundf returns an error that wraps errNotFound, worded as given.
func notFoundf(format string, args ...any) error {
	return &notFoundError{msg: fmt.Sprintf(format, args...)}
}

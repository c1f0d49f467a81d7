package main

import "errors"

var (
	// errProblemsFound is returned when a command ran and found problems
	// (fsck). It maps to exit status 1.
	errProblemsFound = errors.New("problems found")
	// errUsage wraps bad flags and arguments. It maps to exit status 2.
	errUsage = errors.New("invalid usage")
)

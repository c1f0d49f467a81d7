package controller

import "errors"

// Errors returned by this package; match them with errors.Is.
var (
	// ErrInvalidConfig is returned by New for a Config it cannot run with.
	ErrInvalidConfig = errors.New("invalid controller configuration")
	// ErrKubeFledgedRunning is returned by Run while a kube-fledged
	// controller runs in the cluster: two controllers would fight over the
	// same ImageCache objects.
	ErrKubeFledgedRunning = errors.New("a kube-fledged controller is running")
)

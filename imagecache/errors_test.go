package imagecache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
)

// plainTimeout has only a Timeout method, like a net.Error.
type plainTimeout struct{}

func (plainTimeout) Error() string   { return "i/o timeout" }
func (plainTimeout) Timeout() bool   { return true }
func (plainTimeout) Temporary() bool { return true }

func TestErrorClassification(t *testing.T) {
	type class struct{ unauthorized, timeout, transient bool }
	tests := []struct {
		name string
		err  error
		want class
	}{
		{"nil", nil, class{}},
		{"plain", errors.New("manifest invalid"), class{}},
		{"transient", &serviceError{msg: "busy", transient: true}, class{transient: true}},
		{"wrapped transient", fmt.Errorf("outer: %w", &serviceError{msg: "busy", transient: true}), class{transient: true}},
		{"joined transient", errors.Join(errors.New("a"), &serviceError{msg: "busy", transient: true}), class{transient: true}},
		{"says permanent", &serviceError{msg: "bad"}, class{}},
		{"unauthorized never transient", &serviceError{msg: "401", unauthorized: true, transient: true}, class{unauthorized: true}},
		{"timeout without Transient method", plainTimeout{}, class{timeout: true, transient: true}},
		{"timeout its Transient calls permanent", &serviceError{msg: "slow", timeout: true}, class{timeout: true}},
		{"context deadline", fmt.Errorf("pull: %w", context.DeadlineExceeded), class{timeout: true, transient: true}},
		{"os deadline", os.ErrDeadlineExceeded, class{timeout: true, transient: true}},
		{"context canceled", context.Canceled, class{}},
		// The first error in the chain with the method decides.
		{"outer Transient decides", &wrapped{&serviceError{msg: "outer"}, &serviceError{msg: "inner", transient: true}}, class{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := class{IsUnauthorized(tc.err), IsTimeout(tc.err), IsTransient(tc.err)}
			if got != tc.want {
				t.Errorf("classification of %v = %+v, want %+v", tc.err, got, tc.want)
			}
		})
	}
}

// wrapped is an error with its own methods that wraps another.
type wrapped struct {
	*serviceError
	inner error
}

func (w *wrapped) Unwrap() error { return w.inner }

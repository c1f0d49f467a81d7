package accessor

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

var (
	// ErrInvalidKey is returned for a key (an image string or an imageRef)
	// that cannot be stored so that it reads back: empty or not valid UTF-8.
	ErrInvalidKey = errors.New("invalid record key")
	// ErrMalformed is returned by the codec for bytes that are not a valid
	// kubelet.config.k8s.io intent or pulled record.
	ErrMalformed = errors.New("malformed record")
	// ErrCorrupt matches every *CorruptRecordError.
	ErrCorrupt = errors.New("corrupt record")
	// ErrTooLarge is the cause of a CorruptRecordError for a stored file larger
	// than any record the kubelet writes.
	ErrTooLarge = errors.New("record file too large")
	// ErrNilRecord is returned when a nil record is written.
	ErrNilRecord = errors.New("nil record")
	// ErrNotDurable is returned by a write or delete whose change is
	// visible (a later read sees it) but may not survive a power cut, for
	// example when the directory fsync after a rename failed. A cache in
	// front of the store must apply the change too, or it would disagree
	// with what the store now returns.
	ErrNotDurable = errors.New("change applied but not durable")
	// ErrTimeOutOfRange is returned when a record's LastUpdatedTime cannot be
	// written in the kubelet's format (a UTC year outside 0000-9999).
	ErrTimeOutOfRange = errors.New("record time out of range")
)

// CorruptRecordError says a stored record exists but cannot be used.
type CorruptRecordError struct {
	// Path is where the record is stored (a file path for file stores).
	Path string
	// Err is the cause: a decode error, ErrTooLarge, or an I/O error.
	Err error
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("corrupt record %s: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptRecordError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true for every CorruptRecordError.
func (e *CorruptRecordError) Is(target error) bool { return target == ErrCorrupt }

// ListError is returned by list methods next to the values that could be read.
// It holds one error per stored item that could not be read, usually
// *CorruptRecordError values, reachable with errors.As.
type ListError struct {
	What string // "image pull intents" or "image pulled records"
	Errs []error
}

func (e *ListError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of the stored %s could not be read", len(e.Errs), e.What)
	for i, err := range e.Errs {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(e.Errs)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns the individual errors.
func (e *ListError) Unwrap() []error { return e.Errs }

// ValidateKey returns ErrInvalidKey for a key that cannot round-trip through
// any store: the empty string, or a string that is not valid UTF-8 (JSON would
// replace the bad bytes, and the record would never be found again).
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	}
	return nil
}

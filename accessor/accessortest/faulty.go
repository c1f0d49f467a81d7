package accessortest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// FaultyAccessor is an accessor.PullRecordsAccessor for tests that passes
// every call on to another accessor, after logging it, unless a fault set on
// the method fails the call first. Make one with Faulty.
//
// A failed call does not reach the wrapped accessor and returns the zero
// values of its method with the fault's error, except that
// GetImagePulledRecord and PeekImagePulledRecord return (nil, true, err): the
// contract's form for a record that exists but cannot be read, which callers
// must treat as "fail safe".
//
// *FaultyAccessor implements PullRecordsAccessor only. Accessor returns a
// value that also implements each of accessor's optional interfaces that the
// wrapped accessor implements.
//
// All methods are safe for concurrent use: faults may be set and the log
// read while other goroutines call the accessor.
type FaultyAccessor struct {
	inner accessor.PullRecordsAccessor

	mu      sync.Mutex
	faults  map[string][]*fault
	corrupt map[string]error // imageRef -> what reading it returns
	calls   []Call
	counts  map[string]int
	onCall  func(Call)
}

// Call is one call that reached a FaultyAccessor.
type Call struct {
	// Method is the name of the method called, such as "GetImagePulledRecord".
	Method string
	// Key is the image string or imageRef the call names: the argument, or
	// the ImageRef of the record written. It is empty for calls that name
	// none (lists, counts) and for a nil record.
	Key string
}

// String returns the method and the key, separated by a space, or only the
// method when the call names no key.
func (c Call) String() string {
	if c.Key == "" {
		return c.Method
	}
	return c.Method + " " + c.Key
}

// fault fails the calls of one method numbered from..to (counted from 1
// after the fault was set; to == 0 means no end).
type fault struct {
	from, to int
	err      error
	seen     int
}

func (ft *fault) fires() bool {
	return ft.seen >= ft.from && (ft.to == 0 || ft.seen <= ft.to)
}

// faultable are the methods a fault can be set on: every method that
// returns an error.
var faultable = map[string]bool{
	"ListImagePullIntents":    true,
	"ImagePullIntentExists":   true,
	"WriteImagePullIntent":    true,
	"DeleteImagePullIntent":   true,
	"ListImagePulledRecords":  true,
	"GetImagePulledRecord":    true,
	"WriteImagePulledRecord":  true,
	"DeleteImagePulledRecord": true,
	"PeekImagePulledRecord":   true,
	"RangeImagePulledRecords": true,
}

var (
	_ accessor.PullRecordsAccessor = (*FaultyAccessor)(nil)
	_ accessor.RecordPeeker        = faultyPeeker{}
	_ accessor.RecordCounter       = faultyCounter{}
	_ accessor.PulledRecordRanger  = faultyRanger{}
)

// Faulty returns a FaultyAccessor over inner with no faults set. It panics
// if inner is nil.
func Faulty(inner accessor.PullRecordsAccessor) *FaultyAccessor {
	if inner == nil {
		panic("accessortest: Faulty of a nil accessor")
	}
	return &FaultyAccessor{
		inner:   inner,
		faults:  map[string][]*fault{},
		corrupt: map[string]error{},
		counts:  map[string]int{},
	}
}

// Inner returns the wrapped accessor. Calls made on it directly are neither
// logged nor failed: tests use it to set up and inspect the stored state.
func (f *FaultyAccessor) Inner() accessor.PullRecordsAccessor { return f.inner }

// Accessor returns f as the code under test should usually see it: an
// accessor.PullRecordsAccessor that also implements exactly those of
// accessor.RecordPeeker, accessor.RecordCounter and
// accessor.PulledRecordRanger that the wrapped accessor implements, and no
// other. Their calls are logged, and those that return an error can be
// failed, as the other methods'. CountImagePullIntents and
// CountImagePulledRecords cannot fail.
//
// Hand f itself instead to hide the optional interfaces, so that the code
// under test uses only the eight methods of PullRecordsAccessor.
func (f *FaultyAccessor) Accessor() accessor.PullRecordsAccessor {
	_, peeker := f.inner.(accessor.RecordPeeker)
	_, counter := f.inner.(accessor.RecordCounter)
	_, ranger := f.inner.(accessor.PulledRecordRanger)
	// One anonymous struct per combination, embedding f and the adapters of
	// the interfaces inner has: a new optional interface in package accessor
	// doubles the cases here (and in TestFaultyOptionalInterfaces).
	type a = accessor.PullRecordsAccessor
	type (
		p = faultyPeeker
		c = faultyCounter
		g = faultyRanger
	)
	switch {
	case peeker && counter && ranger:
		return struct {
			a
			p
			c
			g
		}{f, p{f}, c{f}, g{f}}
	case peeker && counter:
		return struct {
			a
			p
			c
		}{f, p{f}, c{f}}
	case peeker && ranger:
		return struct {
			a
			p
			g
		}{f, p{f}, g{f}}
	case counter && ranger:
		return struct {
			a
			c
			g
		}{f, c{f}, g{f}}
	case peeker:
		return struct {
			a
			p
		}{f, p{f}}
	case counter:
		return struct {
			a
			c
		}{f, c{f}}
	case ranger:
		return struct {
			a
			g
		}{f, g{f}}
	}
	return f
}

// FailNth makes the nth call of method made after this one fail with err,
// once: FailNth(method, 1, err) fails the next call.
//
// FailNth and Fail panic when method does not name a method that returns
// an error (a mistyped name would otherwise never fire), when n is below 1
// or when err is nil.
func (f *FaultyAccessor) FailNth(method string, n int, err error) {
	f.add(method, &fault{from: n, to: n, err: err})
}

// Fail makes every call of method from now on fail with err.
func (f *FaultyAccessor) Fail(method string, err error) {
	f.add(method, &fault{from: 1, err: err})
}

func (f *FaultyAccessor) add(method string, ft *fault) {
	switch {
	case !faultable[method]:
		panic(fmt.Sprintf("accessortest: %q is not a method that can fail", method))
	case ft.from < 1:
		panic(fmt.Sprintf("accessortest: call number %d for %s; calls are counted from 1", ft.from, method))
	case ft.err == nil:
		panic("accessortest: a fault needs an error, for " + method)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[method] = append(f.faults[method], ft)
}

// Heal removes every fault set on the given methods, or on every method when
// none is given. Corrupt records stay corrupt (see Repair).
func (f *FaultyAccessor) Heal(methods ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(methods) == 0 {
		clear(f.faults)
		return
	}
	for _, m := range methods {
		delete(f.faults, m)
	}
}

// Corrupt makes the record of imageRef, whenever the wrapped accessor holds
// one, read as a stored record that cannot be decoded, as a damaged file
// does in a file store: GetImagePulledRecord and PeekImagePulledRecord
// return (nil, true, err), and ListImagePulledRecords and
// RangeImagePulledRecords leave the record out and name err in their
// *accessor.ListError. err is an *accessor.CorruptRecordError (it matches
// accessor.ErrCorrupt and accessor.ErrMalformed).
//
// Writing or deleting the record through f repairs it, as rewriting or
// removing the file would; so does Repair.
func (f *FaultyAccessor) Corrupt(imageRef string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.corrupt[imageRef] = &accessor.CorruptRecordError{Path: imageRef, Err: accessor.ErrMalformed}
}

// Repair undoes Corrupt: the record of imageRef reads as stored again.
func (f *FaultyAccessor) Repair(imageRef string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.corrupt, imageRef)
}

// OnCall sets fn to run at every call that reaches f, after the call is
// logged and its faults counted, and before it fails or is passed on. fn
// runs without f's lock, so it may call f (those calls run fn as well) or
// yield to widen a race window. OnCall(nil) removes it.
func (f *FaultyAccessor) OnCall(fn func(Call)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onCall = fn
}

// Calls returns the calls logged so far, oldest first.
func (f *FaultyAccessor) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// TakeCalls returns the calls logged so far, oldest first, and empties the
// log.
func (f *FaultyAccessor) TakeCalls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// CallCount returns how many calls of method reached f since it was made,
// failed ones included. TakeCalls does not reset it.
func (f *FaultyAccessor) CallCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[method]
}

// enter logs a call and returns the error of the first of its method's
// faults that fires, if any.
func (f *FaultyAccessor) enter(method, key string) error {
	c := Call{Method: method, Key: key}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.counts[method]++
	var err error
	for _, ft := range f.faults[method] {
		ft.seen++
		if err == nil && ft.fires() {
			err = ft.err
		}
	}
	hook := f.onCall
	f.mu.Unlock()
	if hook != nil {
		hook(c)
	}
	return err
}

// corruptErr returns what reading the record of imageRef returns when it is
// corrupt, or nil.
func (f *FaultyAccessor) corruptErr(imageRef string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.corrupt[imageRef]
}

// corruptRefs returns a snapshot of the corrupt records, nil when none is.
func (f *FaultyAccessor) corruptRefs() map[string]error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.corrupt) == 0 {
		return nil
	}
	return maps.Clone(f.corrupt)
}

// written repairs the record of imageRef after a write or delete that
// reached the wrapped accessor.
func (f *FaultyAccessor) written(imageRef string, err error) error {
	if err == nil || errors.Is(err, accessor.ErrNotDurable) {
		f.Repair(imageRef)
	}
	return err
}

// readRecord applies Corrupt to a read of the record of imageRef.
func (f *FaultyAccessor) readRecord(imageRef string, r *accessor.ImagePulledRecord, ok bool, err error) (*accessor.ImagePulledRecord, bool, error) {
	if ok && err == nil {
		if cerr := f.corruptErr(imageRef); cerr != nil {
			return nil, true, cerr
		}
	}
	return r, ok, err
}

// listError adds the errors of corrupt records to the error a list
// returned, in one *accessor.ListError.
func listError(err error, corrupt []error) error {
	if len(corrupt) == 0 {
		return err
	}
	out := &accessor.ListError{What: "image pulled records"}
	var le *accessor.ListError
	switch {
	case errors.As(err, &le):
		out.Errs = slices.Clone(le.Errs)
	case err != nil:
		out.Errs = []error{err}
	}
	out.Errs = append(out.Errs, corrupt...)
	return out
}

// ListImagePullIntents passes the call on unless a fault fails it.
func (f *FaultyAccessor) ListImagePullIntents() ([]*accessor.ImagePullIntent, error) {
	if err := f.enter("ListImagePullIntents", ""); err != nil {
		return nil, err
	}
	return f.inner.ListImagePullIntents()
}

// ImagePullIntentExists passes the call on unless a fault fails it.
func (f *FaultyAccessor) ImagePullIntentExists(image string) (bool, error) {
	if err := f.enter("ImagePullIntentExists", image); err != nil {
		return false, err
	}
	return f.inner.ImagePullIntentExists(image)
}

// WriteImagePullIntent passes the call on unless a fault fails it.
func (f *FaultyAccessor) WriteImagePullIntent(logger klog.Logger, image string) error {
	if err := f.enter("WriteImagePullIntent", image); err != nil {
		return err
	}
	return f.inner.WriteImagePullIntent(logger, image)
}

// DeleteImagePullIntent passes the call on unless a fault fails it.
func (f *FaultyAccessor) DeleteImagePullIntent(logger klog.Logger, image string) error {
	if err := f.enter("DeleteImagePullIntent", image); err != nil {
		return err
	}
	return f.inner.DeleteImagePullIntent(logger, image)
}

// ListImagePulledRecords passes the call on unless a fault fails it, and
// reports corrupt records in a *accessor.ListError instead of listing them.
func (f *FaultyAccessor) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	if err := f.enter("ListImagePulledRecords", ""); err != nil {
		return nil, err
	}
	records, err := f.inner.ListImagePulledRecords()
	corrupt := f.corruptRefs()
	if corrupt == nil {
		return records, err
	}
	kept := records[:0] // the list is the caller's to change
	var errs []error
	for _, r := range records {
		if r != nil {
			if cerr, ok := corrupt[r.ImageRef]; ok {
				errs = append(errs, cerr)
				continue
			}
		}
		kept = append(kept, r)
	}
	return kept, listError(err, errs)
}

// GetImagePulledRecord passes the call on unless a fault fails it; a
// corrupt record is (nil, true, err).
func (f *FaultyAccessor) GetImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	if err := f.enter("GetImagePulledRecord", imageRef); err != nil {
		return nil, true, err
	}
	r, ok, err := f.inner.GetImagePulledRecord(imageRef)
	return f.readRecord(imageRef, r, ok, err)
}

// WriteImagePulledRecord passes the call on unless a fault fails it. A
// write that reaches the wrapped accessor repairs a corrupt record.
func (f *FaultyAccessor) WriteImagePulledRecord(logger klog.Logger, record *accessor.ImagePulledRecord) error {
	key := ""
	if record != nil {
		key = record.ImageRef
	}
	if err := f.enter("WriteImagePulledRecord", key); err != nil {
		return err
	}
	return f.written(key, f.inner.WriteImagePulledRecord(logger, record))
}

// DeleteImagePulledRecord passes the call on unless a fault fails it. A
// delete that reaches the wrapped accessor repairs a corrupt record.
func (f *FaultyAccessor) DeleteImagePulledRecord(logger klog.Logger, imageRef string) error {
	if err := f.enter("DeleteImagePulledRecord", imageRef); err != nil {
		return err
	}
	return f.written(imageRef, f.inner.DeleteImagePulledRecord(logger, imageRef))
}

// The adapters Accessor embeds, one per optional interface. Each is used
// only when the wrapped accessor implements the interface.

type faultyPeeker struct{ f *FaultyAccessor }

func (p faultyPeeker) PeekImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	if err := p.f.enter("PeekImagePulledRecord", imageRef); err != nil {
		return nil, true, err
	}
	r, ok, err := p.f.inner.(accessor.RecordPeeker).PeekImagePulledRecord(imageRef)
	return p.f.readRecord(imageRef, r, ok, err)
}

type faultyCounter struct{ f *FaultyAccessor }

func (c faultyCounter) CountImagePullIntents() int {
	_ = c.f.enter("CountImagePullIntents", "") // counts cannot fail
	return c.f.inner.(accessor.RecordCounter).CountImagePullIntents()
}

func (c faultyCounter) CountImagePulledRecords() int {
	_ = c.f.enter("CountImagePulledRecords", "")
	return c.f.inner.(accessor.RecordCounter).CountImagePulledRecords()
}

type faultyRanger struct{ f *FaultyAccessor }

func (g faultyRanger) RangeImagePulledRecords(fn func(*accessor.ImagePulledRecord)) error {
	if err := g.f.enter("RangeImagePulledRecords", ""); err != nil {
		return err
	}
	corrupt := g.f.corruptRefs()
	var mu sync.Mutex // fn may be called from several goroutines
	var errs []error
	err := g.f.inner.(accessor.PulledRecordRanger).RangeImagePulledRecords(func(r *accessor.ImagePulledRecord) {
		if r != nil {
			if cerr, ok := corrupt[r.ImageRef]; ok {
				mu.Lock()
				errs = append(errs, cerr)
				mu.Unlock()
				return
			}
		}
		fn(r)
	})
	return listError(err, errs)
}

package memstore

import (
	"github.com/pullrecords/pullrecords/internal/keylock"

	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
)

// defaultStripes is the number of per-key write locks a Cache uses unless
// withStripes says otherwise.
const defaultStripes = 64

// CacheOption configures NewCache. No option is exported today: the cache
// needs no tuning outside this package's tests, and the parameter keeps
// NewCache's signature open for one. An option given a value it cannot use
// makes NewCache fail with an error that names the option and the value; it
// is never ignored or adjusted.
type CacheOption func(*cacheOptions)

type cacheOptions struct {
	stripes int
}

// withStripes sets the number of locks that serialise writes, deletes and
// read-through misses per key (default 64). Keys are spread over them by
// hash; more stripes mean fewer unrelated keys waiting on each other. n below
// 1 is invalid (errInvalidOption).
func withStripes(n int) CacheOption {
	return func(o *cacheOptions) { o.stripes = n }
}

// Cache is a write-through cache in front of another PullRecordsAccessor. See
// the package documentation for its guarantees.
type Cache struct {
	delegate accessor.PullRecordsAccessor
	counter  accessor.RecordCounter // the delegate's, if it has one

	locks *keylock.Set

	// reloadMu serialises loads. A load also holds every stripe, so no
	// write, delete or read-through is in flight while tables are swapped.
	reloadMu sync.Mutex
	intents  atomic.Pointer[intentTable]
	records  atomic.Pointer[recordTable]
}

var (
	_ accessor.PullRecordsAccessor = (*Cache)(nil)
	_ accessor.RecordPeeker        = (*Cache)(nil)
	_ accessor.RecordCounter       = (*Cache)(nil)
)

// NewCache returns a cache in front of delegate, warmed up by listing the
// delegate's intents and records once. A list that fails, fully or partly,
// is logged and leaves the cache non-authoritative for that kind until a
// Reload succeeds; it does not make NewCache fail. NewCache fails with
// ErrNilDelegate for a nil delegate.
func NewCache(logger klog.Logger, delegate accessor.PullRecordsAccessor, opts ...CacheOption) (*Cache, error) {
	if delegate == nil {
		return nil, ErrNilDelegate
	}
	o := cacheOptions{stripes: defaultStripes}
	for _, opt := range opts {
		opt(&o)
	}
	if o.stripes < 1 {
		return nil, fmt.Errorf("%w: withStripes(%d): want at least 1", errInvalidOption, o.stripes)
	}
	c := &Cache{
		delegate: delegate,
		locks:    keylock.New(o.stripes),
	}
	c.counter, _ = delegate.(accessor.RecordCounter)
	if err := c.load(logger); err != nil {
		logger.Error(err, "Could not list every stored pull record; the cache reads through to the store for the affected kind until a reload succeeds",
			"intentsAuthoritative", c.intents.Load().authoritative,
			"recordsAuthoritative", c.records.Load().authoritative)
	}
	return c, nil
}

// Reload lists the delegate again and replaces the cache contents with what
// it returned. Each kind (intents, records) becomes authoritative if its list
// succeeded without any error, and non-authoritative otherwise; the returned
// error joins the list errors (use errors.As to find an *accessor.ListError).
// Writes, deletes and read-through misses wait while Reload runs; cache hits
// do not, and see the old contents until the new ones are in place.
func (c *Cache) Reload(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	err := c.load(logger)
	logger.V(2).Info("Reloaded the pull records cache",
		"intents", c.intents.Load().count(), "records", c.records.Load().count(),
		"intentsAuthoritative", c.intents.Load().authoritative,
		"recordsAuthoritative", c.records.Load().authoritative)
	return err
}

// load lists the delegate and publishes new tables, holding every stripe.
func (c *Cache) load(logger klog.Logger) error {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	defer c.locks.LockAll()()

	intents, intentsErr := c.delegate.ListImagePullIntents()
	it := &intentTable{authoritative: intentsErr == nil}
	for _, in := range intents {
		if in == nil || accessor.ValidateKey(in.Image) != nil {
			it.authoritative = false
			continue
		}
		it.store(in.Image)
	}

	rt, recordsErr := loadRecords(c.delegate)

	c.intents.Store(it)
	c.records.Store(rt)
	if intentsErr != nil {
		intentsErr = fmt.Errorf("listing image pull intents: %w", intentsErr)
	}
	if recordsErr != nil {
		recordsErr = fmt.Errorf("listing image pulled records: %w", recordsErr)
	}
	if err := errors.Join(intentsErr, recordsErr); err != nil {
		return err
	}
	if !it.authoritative || !rt.authoritative {
		logger.Info("The store listed an item with an invalid key; the cache reads through to the store for that kind")
	}
	return nil
}

// loadRecords builds a record table from the delegate's records. A delegate
// that can range over its records (fsstore) hands them over one at a time,
// on several goroutines, so that the warm-up never holds every decoded
// record beside the table it builds.
func loadRecords(delegate accessor.PullRecordsAccessor) (*recordTable, error) {
	rt := &recordTable{}
	in := newInterner()
	var bad atomic.Bool
	add := func(r *accessor.ImagePulledRecord) {
		if r == nil || accessor.ValidateKey(r.ImageRef) != nil {
			bad.Store(true)
			return
		}
		rt.store(newRecordEntry(r, in))
	}
	var err error
	if rr, ok := delegate.(accessor.PulledRecordRanger); ok {
		err = rr.RangeImagePulledRecords(add)
	} else {
		var records []*accessor.ImagePulledRecord
		records, err = delegate.ListImagePulledRecords()
		for i, r := range records {
			add(r)
			records[i] = nil // the table's form replaces it
		}
	}
	rt.authoritative = err == nil && !bad.Load()
	return rt, err
}

// Authoritative reports whether the cache answers every lookup and list from
// memory, for both intents and records.
func (c *Cache) Authoritative() bool {
	return c.intents.Load().authoritative && c.records.Load().authoritative
}

// ListImagePullIntents returns every intent: from memory when the cache is
// authoritative for intents, else from the delegate.
func (c *Cache) ListImagePullIntents() ([]*accessor.ImagePullIntent, error) {
	if t := c.intents.Load(); t.authoritative {
		return t.list(), nil
	}
	return c.delegate.ListImagePullIntents()
}

// ImagePullIntentExists reports whether an intent for image is stored. A hit
// is answered from memory; so is a miss when the cache is authoritative for
// intents. Otherwise the delegate is asked and a found intent is cached.
func (c *Cache) ImagePullIntentExists(image string) (bool, error) {
	t := c.intents.Load()
	if t.has(image) {
		return true, nil
	}
	if t.authoritative {
		return false, nil
	}
	return c.intentReadThrough(image)
}

func (c *Cache) intentReadThrough(image string) (bool, error) {
	defer c.locks.Lock(image)()
	t := c.intents.Load() // a Reload may have replaced it meanwhile
	if t.has(image) {
		return true, nil
	}
	if t.authoritative {
		return false, nil
	}
	ok, err := c.delegate.ImagePullIntentExists(image)
	if err != nil || !ok {
		return ok, err
	}
	if accessor.ValidateKey(image) == nil {
		t.store(image)
	}
	return true, nil
}

// WriteImagePullIntent writes the intent to the delegate and, if the
// delegate applied it (no error, or an error matching accessor.ErrNotDurable,
// which is still returned), to memory.
func (c *Cache) WriteImagePullIntent(logger klog.Logger, image string) error {
	if err := accessor.ValidateKey(image); err != nil {
		return err
	}
	defer c.locks.Lock(image)()
	err := c.delegate.WriteImagePullIntent(logger, image)
	if err == nil || errors.Is(err, accessor.ErrNotDurable) {
		c.intents.Load().store(image)
	}
	return err
}

// DeleteImagePullIntent deletes the intent from the delegate and, if the
// delegate applied the delete (no error, or an error matching
// accessor.ErrNotDurable, which is still returned), from memory.
func (c *Cache) DeleteImagePullIntent(logger klog.Logger, image string) error {
	defer c.locks.Lock(image)()
	err := c.delegate.DeleteImagePullIntent(logger, image)
	if err == nil || errors.Is(err, accessor.ErrNotDurable) {
		c.intents.Load().remove(image)
	}
	return err
}

// ListImagePulledRecords returns copies of every record: from memory when the
// cache is authoritative for records, else from the delegate.
func (c *Cache) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	if t := c.records.Load(); t.authoritative {
		return t.list(), nil
	}
	return c.delegate.ListImagePulledRecords()
}

// GetImagePulledRecord returns a copy of the record for imageRef. See
// PeekImagePulledRecord for where the answer comes from.
func (c *Cache) GetImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	e, ok, err := c.entry(imageRef)
	if e == nil {
		return nil, ok, err
	}
	return e.record(), true, nil
}

// PeekImagePulledRecord returns the cached record for imageRef without
// copying it. The record is shared and read-only: the caller must not modify
// it or anything it points to. A hit is answered from memory without locks or
// allocations; so is a miss when the cache is authoritative for records.
// Otherwise the delegate is read, a found record is cached, and an error
// (for example a corrupt record, reported as found with an error) is returned
// as the delegate gave it and not cached.
func (c *Cache) PeekImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	e, ok, err := c.entry(imageRef)
	if e == nil {
		return nil, ok, err
	}
	return e.peek(), true, nil
}

func (c *Cache) entry(imageRef string) (*recordEntry, bool, error) {
	t := c.records.Load()
	if e := t.load(imageRef); e != nil {
		return e, true, nil
	}
	if t.authoritative {
		return nil, false, nil
	}
	return c.recordReadThrough(imageRef)
}

func (c *Cache) recordReadThrough(imageRef string) (*recordEntry, bool, error) {
	defer c.locks.Lock(imageRef)()
	t := c.records.Load()
	if e := t.load(imageRef); e != nil {
		return e, true, nil
	}
	if t.authoritative {
		return nil, false, nil
	}
	r, ok, err := c.delegate.GetImagePulledRecord(imageRef)
	if err != nil {
		return nil, ok, err
	}
	if !ok || r == nil || r.ImageRef != imageRef {
		return nil, false, nil
	}
	e := newRecordEntry(r, nil)
	if accessor.ValidateKey(imageRef) == nil {
		t.store(e)
	}
	return e, true, nil
}

// WriteImagePulledRecord writes the record to the delegate and, if the
// delegate applied it (no error, or an error matching accessor.ErrNotDurable,
// which is still returned), a copy of it (time in storage form) to memory.
func (c *Cache) WriteImagePulledRecord(logger klog.Logger, record *accessor.ImagePulledRecord) error {
	if record == nil {
		return accessor.ErrNilRecord
	}
	if err := accessor.ValidateKey(record.ImageRef); err != nil {
		return err
	}
	// Copy first, so the cached value is what the caller passed even if it
	// changes the record after the delegate has stored it.
	e := newRecordEntry(record, nil)
	defer c.locks.Lock(e.ref())()
	err := c.delegate.WriteImagePulledRecord(logger, record)
	if err == nil || errors.Is(err, accessor.ErrNotDurable) {
		c.records.Load().store(e)
	}
	return err
}

// DeleteImagePulledRecord deletes the record from the delegate and, if the
// delegate applied the delete (no error, or an error matching
// accessor.ErrNotDurable, which is still returned), from memory.
func (c *Cache) DeleteImagePulledRecord(logger klog.Logger, imageRef string) error {
	defer c.locks.Lock(imageRef)()
	err := c.delegate.DeleteImagePulledRecord(logger, imageRef)
	if err == nil || errors.Is(err, accessor.ErrNotDurable) {
		c.records.Load().remove(imageRef)
	}
	return err
}

// CountImagePullIntents returns the delegate's count if it keeps one, else
// the number of cached intents.
func (c *Cache) CountImagePullIntents() int {
	if c.counter != nil {
		return c.counter.CountImagePullIntents()
	}
	return c.intents.Load().count()
}

// CountImagePulledRecords returns the delegate's count if it keeps one, else
// the number of cached records.
func (c *Cache) CountImagePulledRecords() int {
	if c.counter != nil {
		return c.counter.CountImagePulledRecords()
	}
	return c.records.Load().count()
}

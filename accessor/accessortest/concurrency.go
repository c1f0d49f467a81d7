package accessortest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pullrecords/pullrecords/accessor"
)

const (
	concGoroutines = 8
	concOps        = 200
	concOwnKeys    = 3
	concSharedKeys = 3
)

func ownRecordKey(g, k int) string { return fmt.Sprintf("sha256:own-%d-%d", g, k) }
func ownIntentKey(g, k int) string { return fmt.Sprintf("example.com/own-%d/app:%d", g, k) }
func sharedRecordKey(k int) string { return fmt.Sprintf("sha256:shared-%d", k) }
func sharedIntentKey(k int) string { return fmt.Sprintf("example.com/shared/app:%d", k) }
func writerName(g, op int) string  { return fmt.Sprintf("example.com/writer-%d/op-%d", g, op) }
func isOwnRecordKey(g int, k string) bool {
	return strings.HasPrefix(k, fmt.Sprintf("sha256:own-%d-", g))
}
func isOwnIntentKey(g int, k string) bool {
	return strings.HasPrefix(k, fmt.Sprintf("example.com/own-%d/", g))
}

// checkShared reports whether rec is exactly a value some goroutine wrote
// under key: its single mapping name says who wrote it, and the rest of the
// content must be what that writer built.
func checkShared(key string, rec *accessor.ImagePulledRecord) error {
	if rec == nil {
		return fmt.Errorf("nil record for %s", key)
	}
	if len(rec.CredentialMapping) != 1 {
		return fmt.Errorf("record %s has %d mapping entries, want 1 (torn value?)", key, len(rec.CredentialMapping))
	}
	for name := range rec.CredentialMapping {
		var g, op int
		if _, err := fmt.Sscanf(name, "example.com/writer-%d/op-%d", &g, &op); err != nil {
			return fmt.Errorf("record %s has mapping name %q that no writer used", key, name)
		}
		if diff := DiffRecords(NewRecord(key, writerName(g, op)), rec); diff != "" {
			return fmt.Errorf("record %s is not what writer %d wrote at op %d (torn value?) (-want +got):\n%s", key, g, op, diff)
		}
	}
	return nil
}

// concModel is what one goroutine knows about its own keys.
type concModel struct {
	records map[string]*accessor.ImagePulledRecord
	intents map[string]bool
}

func (m *concModel) recordKeys() []string {
	out := make([]string, 0, len(m.records))
	for k := range m.records {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (m *concModel) intentKeys() []string {
	out := make([]string, 0, len(m.intents))
	for k := range m.intents {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkOwnRecords compares listed records with goroutine g's model and checks
// every shared record and that no key appears twice.
func checkListedRecords(g int, m *concModel, list []*accessor.ImagePulledRecord) error {
	seen := make(map[string]bool, len(list))
	var own []string
	for _, r := range list {
		if r == nil {
			return fmt.Errorf("list holds a nil record")
		}
		if seen[r.ImageRef] {
			return fmt.Errorf("list holds %s twice", r.ImageRef)
		}
		seen[r.ImageRef] = true
		switch {
		case isOwnRecordKey(g, r.ImageRef):
			own = append(own, r.ImageRef)
			if diff := DiffRecords(m.records[r.ImageRef], r); diff != "" {
				return fmt.Errorf("listed own record %s differs from the last write (-want +got):\n%s", r.ImageRef, diff)
			}
		case strings.HasPrefix(r.ImageRef, "sha256:shared-"):
			if err := checkShared(r.ImageRef, r); err != nil {
				return err
			}
		}
	}
	slices.Sort(own)
	if diff := cmp.Diff(m.recordKeys(), own, cmpEmpty); diff != "" {
		return fmt.Errorf("listed own records of goroutine %d (-want +got):\n%s", g, diff)
	}
	return nil
}

func checkListedIntents(g int, m *concModel, list []*accessor.ImagePullIntent) error {
	seen := make(map[string]bool, len(list))
	var own []string
	for _, in := range list {
		if in == nil {
			return fmt.Errorf("list holds a nil intent")
		}
		if seen[in.Image] {
			return fmt.Errorf("list holds intent %s twice", in.Image)
		}
		seen[in.Image] = true
		if isOwnIntentKey(g, in.Image) {
			own = append(own, in.Image)
		}
	}
	slices.Sort(own)
	if diff := cmp.Diff(m.intentKeys(), own, cmpEmpty); diff != "" {
		return fmt.Errorf("listed own intents of goroutine %d (-want +got):\n%s", g, diff)
	}
	return nil
}

func testConcurrency(t *testing.T, newStore NewStoreFunc) {
	s := newStore(t)
	logger := testLogger(t)
	models := make([]*concModel, concGoroutines)
	var wg sync.WaitGroup
	for g := range concGoroutines {
		m := &concModel{records: map[string]*accessor.ImagePulledRecord{}, intents: map[string]bool{}}
		models[g] = m
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2535))
			fail := func(op int, format string, args ...any) {
				t.Errorf("goroutine %d op %d: %s", g, op, fmt.Sprintf(format, args...))
			}
			for op := range concOps {
				own := rng.IntN(concOwnKeys)
				shared := rng.IntN(concSharedKeys)
				switch choice := rng.IntN(20); {
				case choice < 3:
					key := ownRecordKey(g, own)
					rec := NewRecord(key, writerName(g, op))
					if err := s.WriteImagePulledRecord(logger, rec); err != nil {
						fail(op, "WriteImagePulledRecord(%s): %v", key, err)
						continue
					}
					m.records[key] = rec
				case choice < 5:
					key := ownRecordKey(g, own)
					got, ok, err := s.GetImagePulledRecord(key)
					want := m.records[key]
					switch {
					case err != nil:
						fail(op, "GetImagePulledRecord(%s): %v", key, err)
					case ok != (want != nil):
						fail(op, "GetImagePulledRecord(%s) found = %v; want %v", key, ok, want != nil)
					case ok:
						if diff := DiffRecords(want, got); diff != "" {
							fail(op, "GetImagePulledRecord(%s) is not the last write (-want +got):\n%s", key, diff)
						}
					}
				case choice < 6:
					key := ownRecordKey(g, own)
					if err := s.DeleteImagePulledRecord(logger, key); err != nil {
						fail(op, "DeleteImagePulledRecord(%s): %v", key, err)
						continue
					}
					delete(m.records, key)
				case choice < 7:
					key := ownIntentKey(g, own)
					if err := s.WriteImagePullIntent(logger, key); err != nil {
						fail(op, "WriteImagePullIntent(%s): %v", key, err)
						continue
					}
					m.intents[key] = true
				case choice < 8:
					key := ownIntentKey(g, own)
					if err := s.DeleteImagePullIntent(logger, key); err != nil {
						fail(op, "DeleteImagePullIntent(%s): %v", key, err)
						continue
					}
					delete(m.intents, key)
				case choice < 9:
					key := ownIntentKey(g, own)
					ok, err := s.ImagePullIntentExists(key)
					if err != nil || ok != m.intents[key] {
						fail(op, "ImagePullIntentExists(%s) = %v, %v; want %v, nil", key, ok, err, m.intents[key])
					}
				case choice < 12:
					key := sharedRecordKey(shared)
					if err := s.WriteImagePulledRecord(logger, NewRecord(key, writerName(g, op))); err != nil {
						fail(op, "WriteImagePulledRecord(%s): %v", key, err)
					}
				case choice < 15:
					key := sharedRecordKey(shared)
					got, ok, err := s.GetImagePulledRecord(key)
					if err != nil {
						fail(op, "GetImagePulledRecord(%s): %v", key, err)
					} else if ok {
						if err := checkShared(key, got); err != nil {
							fail(op, "GetImagePulledRecord: %v", err)
						}
					} else if got != nil {
						fail(op, "GetImagePulledRecord(%s) returned a record with found = false", key)
					}
				case choice < 16:
					key := sharedRecordKey(shared)
					if err := s.DeleteImagePulledRecord(logger, key); err != nil {
						fail(op, "DeleteImagePulledRecord(%s): %v", key, err)
					}
				case choice < 17:
					key := sharedIntentKey(shared)
					var err error
					switch rng.IntN(3) {
					case 0:
						err = s.WriteImagePullIntent(logger, key)
					case 1:
						err = s.DeleteImagePullIntent(logger, key)
					default:
						_, err = s.ImagePullIntentExists(key)
					}
					if err != nil {
						fail(op, "shared intent %s: %v", key, err)
					}
				case choice < 19:
					list, err := s.ListImagePulledRecords()
					if err != nil {
						fail(op, "ListImagePulledRecords: %v", err)
						continue
					}
					if err := checkListedRecords(g, m, list); err != nil {
						fail(op, "ListImagePulledRecords: %v", err)
					}
				default:
					list, err := s.ListImagePullIntents()
					if err != nil {
						fail(op, "ListImagePullIntents: %v", err)
						continue
					}
					if err := checkListedIntents(g, m, list); err != nil {
						fail(op, "ListImagePullIntents: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()

	// Final state: every own key is its goroutine's last write; shared keys
	// hold whole values.
	records, err := s.ListImagePulledRecords()
	if err != nil {
		t.Fatalf("final ListImagePulledRecords: %v", err)
	}
	intents, err := s.ListImagePullIntents()
	if err != nil {
		t.Fatalf("final ListImagePullIntents: %v", err)
	}
	for g, m := range models {
		if err := checkListedRecords(g, m, records); err != nil {
			t.Errorf("final records: %v", err)
		}
		if err := checkListedIntents(g, m, intents); err != nil {
			t.Errorf("final intents: %v", err)
		}
		for k := range concOwnKeys {
			key := ownRecordKey(g, k)
			got, ok, err := s.GetImagePulledRecord(key)
			want := m.records[key]
			if err != nil || ok != (want != nil) {
				t.Errorf("final GetImagePulledRecord(%s) = _, %v, %v; want found = %v", key, ok, err, want != nil)
				continue
			}
			if diff := DiffRecords(want, got); ok && diff != "" {
				t.Errorf("final GetImagePulledRecord(%s) (-want +got):\n%s", key, diff)
			}
			ikey := ownIntentKey(g, k)
			if ok, err := s.ImagePullIntentExists(ikey); err != nil || ok != m.intents[ikey] {
				t.Errorf("final ImagePullIntentExists(%s) = %v, %v; want %v", ikey, ok, err, m.intents[ikey])
			}
		}
	}
	for k := range concSharedKeys {
		key := sharedRecordKey(k)
		got, ok, err := s.GetImagePulledRecord(key)
		if err != nil {
			t.Errorf("final GetImagePulledRecord(%s): %v", key, err)
		} else if ok {
			if err := checkShared(key, got); err != nil {
				t.Errorf("final: %v", err)
			}
		}
	}
	// Every listed key is one the test wrote.
	for _, r := range records {
		if !strings.HasPrefix(r.ImageRef, "sha256:own-") && !strings.HasPrefix(r.ImageRef, "sha256:shared-") {
			t.Errorf("final list holds unknown record %s", r.ImageRef)
		}
	}
	for _, in := range intents {
		if !strings.HasPrefix(in.Image, "example.com/own-") && !strings.HasPrefix(in.Image, "example.com/shared/") {
			t.Errorf("final list holds unknown intent %s", in.Image)
		}
	}
}

package fsstore

import (
	"testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
)

func TestConformance(t *testing.T) {
	accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
		s, err := New(testLogger(t), t.TempDir(), WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestConformanceSynced runs the suite on stores that sync, to cover the
// fsync path under the same workload.
func TestConformanceSynced(t *testing.T) {
	accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
		return openStore(t, t.TempDir())
	})
}

package memstore_test

import (
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/accessor/accessortest"
	"github.com/pullrecords/pullrecords/memstore"
)

func TestStoreConformance(t *testing.T) {
	accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
		return memstore.New()
	})
}

func TestCacheOverStoreConformance(t *testing.T) {
	accessortest.Run(t, func(t *testing.T) accessor.PullRecordsAccessor {
		c, err := memstore.NewCache(ktesting.NewLogger(t, ktesting.NewConfig()), memstore.New())
		if err != nil {
			t.Fatalf("NewCache: %v", err)
		}
		return c
	})
}

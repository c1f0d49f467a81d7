package memstore_test

import (
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/memstore"
)

// A write-through cache in front of a store. In a node the delegate is the
// kubelet-compatible file store; here it is an in-memory Store.
func ExampleNewCache() {
	logger := klog.Background()
	store := memstore.New()
	// A record that was on "disk" before the cache started.
	_ = store.WriteImagePulledRecord(logger, &accessor.ImagePulledRecord{
		ImageRef:        "sha256:1111",
		LastUpdatedTime: accessor.StorageTime(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)),
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			"docker.io/library/nginx": {NodePodsAccessible: true},
		},
	})

	cache, err := memstore.NewCache(logger, store)
	if err != nil {
		fmt.Println("NewCache:", err)
		return
	}
	fmt.Println("authoritative:", cache.Authoritative())

	// Writes go to the store first, then to memory.
	_ = cache.WriteImagePulledRecord(logger, &accessor.ImagePulledRecord{
		ImageRef: "sha256:2222",
		// Stored at whole seconds in UTC, like on disk.
		LastUpdatedTime: accessor.StorageTime(time.Date(2025, 6, 2, 9, 30, 15, 999, time.UTC)),
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			"registry.example.com/team/app": {KubernetesSecrets: []accessor.ImagePullSecret{
				{UID: "0b6f8a1c", Namespace: "team", Name: "regcred", CredentialHash: "9f86d08188"},
			}},
		},
	})

	// The hot path: a shared, read-only record, no copy, no lock.
	rec, found, err := cache.PeekImagePulledRecord("sha256:2222")
	fmt.Println(found, err, rec.LastUpdatedTime.UTC().Format(time.RFC3339),
		rec.CredentialMapping["registry.example.com/team/app"].KubernetesSecrets[0].Name)

	// A miss in an authoritative cache is "not found" without asking the store.
	_, found, err = cache.GetImagePulledRecord("sha256:3333")
	fmt.Println(found, err)

	fmt.Println("records:", cache.CountImagePulledRecords())
	// Output:
	// authoritative: true
	// true <nil> 2025-06-02T09:30:15Z regcred
	// false <nil>
	// records: 2
}

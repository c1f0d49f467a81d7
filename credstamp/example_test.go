package credstamp_test

import (
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/credstamp"
)

// A shim stamps a verification once the origin accepted a credential, and
// answers from the stamp until the TTL runs out.
func Example() {
	dir, _ := os.MkdirTemp("", "verified")
	defer os.RemoveAll(dir)
	clock := testingclock.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))

	stamps, err := credstamp.Open(logr.Discard(), dir, credstamp.WithClock(clock))
	if err != nil {
		panic(err)
	}
	k := credstamp.Key{Credential: "anonymous", Repository: "docker.io/library/busybox", Digest: "sha256:" + fmt.Sprintf("%064d", 7)}
	fmt.Println("before:", stamps.Fresh(k, time.Hour))
	if err := stamps.Stamp(k); err != nil {
		panic(err)
	}
	fmt.Println("stamped:", stamps.Fresh(k, time.Hour))
	stamps.Close()

	clock.SetTime(clock.Now().Add(2 * time.Hour))
	stamps, _ = credstamp.Open(logr.Discard(), dir, credstamp.WithClock(clock))
	defer stamps.Close()
	fmt.Println("reopened two hours later:", stamps.Fresh(k, time.Hour))
	removed, _ := stamps.Prune(time.Hour)
	fmt.Println("pruned:", removed)
	// Output:
	// before: false
	// stamped: true
	// reopened two hours later: false
	// pruned: 1
}

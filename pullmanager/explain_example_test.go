package pullmanager_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// A pod of another namespace asks for an image team-a pulled with its
// secret. The explanation comes from the manager's own decision code, run
// without writing; the check then gives the same answer.
func ExamplePullManager_ExplainImagePull() {
	ctx := context.Background()
	records := memstore.New()
	policy, _ := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	// A nil ImageLister: no start-up recovery, so building the manager
	// writes nothing (a read-only store works too).
	clock := clocktesting.NewFakeClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	manager, err := pullmanager.NewImagePullManager(ctx, records, policy, nil, pullmanager.WithClock(clock))
	if err != nil {
		panic(err)
	}
	teamA := accessor.ImagePullSecret{UID: "uid-a", Namespace: "team-a", Name: "regcred", CredentialHash: "h1"}
	manager.RecordImagePulled(ctx, "registry.example.com/team-a/api:1.4", "sha256:a1",
		&accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{teamA}})

	teamB := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return []accessor.ImagePullSecret{{UID: "uid-b", Namespace: "team-b", Name: "regcred", CredentialHash: "h2"}}, nil, nil
	}
	e := manager.ExplainImagePull(ctx, "registry.example.com/team-a/api:1.4", "sha256:a1", teamB)
	fmt.Printf("must pull: %t (%s), step %d: %s\n", e.MustPull, e.Result, e.DecidedAt, e.Rule)
	for _, s := range e.Steps {
		fmt.Printf("%2d %s: %s\n", s.Number, s.Check, s.Finding)
	}
	must, _ := manager.MustAttemptImagePull(logr.NewContext(ctx, logr.Discard()), "registry.example.com/team-a/api:1.4", "sha256:a1", teamB)
	fmt.Println("the check says must pull:", must)
	// Output:
	// must pull: true (mustAuthenticate), step 14: no matching credentials
	//  1 image present on the node: yes, as sha256:a1
	//  3 pulled record for the imageRef: found (last updated 2026-03-02T09:00:00Z): pulled by the kubelet
	//  5 credential verification policy: NeverVerifyPreloadedImages requires verification
	//  6 pulled record exists: yes
	//  7 credential mapping key: registry.example.com/team-a/api
	//  8 credentials recorded for registry.example.com/team-a/api: 1 secret(s), 0 service account(s), node-wide false
	// 11 pod credentials (looked up only now): 1 secret(s), service account none
	// 12 pod secrets against recorded secrets: no pod secret matches a recorded secret or its credential
	// 13 pod service account against recorded ones: the pod uses no service account credentials
	// 14 result: no recorded credential matches the pod's
	// the check says must pull: true
}

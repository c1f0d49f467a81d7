package explain_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/explain"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// A pod of another namespace asks for an image team-a pulled with its
// secret: it must pull, and the manager's explanation names the step.
func ExampleExplain() {
	store := memstore.New()
	err := store.WriteImagePulledRecord(klog.Background(), &accessor.ImagePulledRecord{
		LastUpdatedTime: metav1.NewTime(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)),
		ImageRef:        "sha256:a1",
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			"registry.example.com/team-a/api": {KubernetesSecrets: []accessor.ImagePullSecret{
				{UID: "uid-a", Namespace: "team-a", Name: "regcred", CredentialHash: "h1"}}},
		},
	})
	if err != nil {
		panic(err)
	}
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	if err != nil {
		panic(err)
	}
	pod := explain.Pod{Secrets: []accessor.ImagePullSecret{{UID: "uid-b", Namespace: "team-b", Name: "regcred", CredentialHash: "h2"}}}
	e, err := explain.Explain(context.Background(), store, explain.Options{Policy: policy, PolicyName: "NeverVerifyPreloadedImages"},
		"registry.example.com/team-a/api:1.4", "sha256:a1", pod)
	if err != nil {
		panic(err)
	}
	fmt.Printf("must pull: %t (%s), step %d: %s\n", e.MustPull, e.Result, e.DecidedAt, e.Rule)
	for _, s := range e.Steps {
		fmt.Printf("%2d %s\n", s.Number, s.Check)
	}
	// Output:
	// must pull: true (mustAuthenticate), step 14: no matching credentials
	//  1 image present on the node
	//  3 pulled record for the imageRef
	//  5 credential verification policy
	//  6 pulled record exists
	//  7 credential mapping key
	//  8 credentials recorded for registry.example.com/team-a/api
	// 11 pod credentials (looked up only now)
	// 12 pod secrets against recorded secrets
	// 13 pod service account against recorded ones
	// 14 result
}

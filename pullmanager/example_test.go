package pullmanager_test

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// runtimeImages stands in for the container runtime's image list.
type runtimeImages []pullmanager.Image

func (r runtimeImages) ListImages(context.Context) ([]pullmanager.Image, error) { return r, nil }

// The kubelet flow: record the intent, pull, record the pull with the
// credential that was used, then check another pod's access.
func Example_kubeletFlow() {
	ctx := context.Background()
	logger := logr.Discard()
	kubeletDir, _ := os.MkdirTemp("", "kubelet")
	defer os.RemoveAll(kubeletDir)

	disk, err := fsstore.New(logger, kubeletDir)
	if err != nil {
		panic(err)
	}
	records, err := memstore.NewCache(logger, disk)
	if err != nil {
		panic(err)
	}
	policy, _ := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	manager, err := pullmanager.NewImagePullManager(ctx, records, policy, runtimeImages{})
	if err != nil {
		panic(err)
	}

	const image, imageRef = "registry.example/team/app:v1", "sha256:1234"
	teamSecret := accessor.ImagePullSecret{
		UID: "9d2c", Namespace: "team", Name: "regcred",
		CredentialHash: pullmanager.CredentialHash(pullmanager.AuthConfig{Username: "team", Password: "s3cret"}),
	}

	// Pull with the team's secret.
	if err := manager.RecordPullIntent(logger, image); err != nil {
		panic(err)
	}
	// ... the runtime pulls the image here ...
	manager.RecordImagePulled(ctx, image, imageRef, &accessor.ImagePullCredentials{
		KubernetesSecrets: []accessor.ImagePullSecret{teamSecret},
	})

	// A pod of the same team may use the image; a pod of another team must pull.
	teamPod := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return []accessor.ImagePullSecret{teamSecret}, nil, nil
	}
	otherPod := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return nil, nil, nil
	}
	mustPull, _ := manager.MustAttemptImagePull(ctx, image, imageRef, teamPod)
	fmt.Println("team pod must pull:", mustPull)
	mustPull, _ = manager.MustAttemptImagePull(ctx, image, imageRef, otherPod)
	fmt.Println("other pod must pull:", mustPull)
	// Output:
	// team pod must pull: false
	// other pod must pull: true
}

// A runtime shim enforces the same policy without the kubelet: it keeps the
// records in memory (or on disk), records the pulls it performs, and asks
// before serving an image that is already present.
func Example_runtimeShim() {
	ctx := context.Background()
	logger := logr.Discard()
	records, _ := memstore.NewCache(logger, memstore.New())
	policy, _ := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyAllowlistedImages,
		[]string{"registry.k8s.io/*"})
	manager, _ := pullmanager.NewImagePullManager(ctx, records, policy, nil)

	// The shim pulled a private image with a service account token.
	builder := accessor.ImagePullServiceAccount{UID: "77aa", Namespace: "ci", Name: "builder"}
	_ = manager.RecordPullIntent(logger, "private.example/ci/runner:5")
	manager.RecordImagePulled(ctx, "private.example/ci/runner:5", "sha256:5555",
		&accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{builder}})

	asServiceAccount := func(sa *accessor.ImagePullServiceAccount) pullmanager.GetPodCredentials {
		return func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) { return nil, sa, nil }
	}
	other := accessor.ImagePullServiceAccount{UID: "88bb", Namespace: "ci", Name: "default"}
	for _, c := range []struct {
		image, ref string
		sa         *accessor.ImagePullServiceAccount
	}{
		{"private.example/ci/runner:5", "sha256:5555", &builder},
		{"private.example/ci/runner:5", "sha256:5555", &other},
		{"registry.k8s.io/pause:3.10", "sha256:pause", nil}, // allowlisted
		{"private.example/ci/runner:6", "", &builder},       // not present
	} {
		mustPull, _ := manager.MustAttemptImagePull(ctx, c.image, c.ref, asServiceAccount(c.sa))
		fmt.Printf("%s must pull: %v\n", c.image, mustPull)
	}
	// Output:
	// private.example/ci/runner:5 must pull: false
	// private.example/ci/runner:5 must pull: true
	// registry.k8s.io/pause:3.10 must pull: false
	// private.example/ci/runner:6 must pull: true
}

package pullmanager_test

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// runtimeImages stands in for the container runtime's image list.
type runtimeImages []imageruntime.Image

func (r runtimeImages) ListImages(context.Context) ([]imageruntime.Image, error) { return r, nil }

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
		CredentialHash: imageruntime.CredentialHash(imageruntime.AuthConfig{Username: "team", Password: "s3cret"}),
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

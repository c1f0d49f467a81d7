package recordsdir_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/pullmanager"
	"github.com/pullrecords/pullrecords/recordsdir"
)

// Open a records directory, record a pull made with a secret, and find the
// record again after a restart: only a pod holding the secret may use the
// image without pulling. While the directory is open, nobody else may open
// it.
func Example() {
	ctx := context.Background()
	stateDir, _ := os.MkdirTemp("", "records")
	defer os.RemoveAll(stateDir)
	policy, _ := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)

	records, err := recordsdir.Open(ctx, stateDir, policy, nil)
	if err != nil {
		panic(err)
	}
	_, err = recordsdir.Open(ctx, stateDir, policy, nil)
	fmt.Println("second writer locked out:", errors.Is(err, fsstore.ErrLocked))

	const image, imageRef = "registry.example/team/app:v1", "sha256:1234"
	secret := accessor.ImagePullSecret{UID: "9d2c", Namespace: "team", Name: "regcred",
		CredentialHash: imageruntime.CredentialHash(imageruntime.AuthConfig{Username: "team", Password: "s3cret"})}
	manager := records.Manager()
	if err := manager.RecordPullIntent(klog.FromContext(ctx), image); err != nil {
		panic(err)
	}
	// ... the runtime pulls the image with the secret here ...
	manager.RecordImagePulled(ctx, image, imageRef, &accessor.ImagePullCredentials{
		KubernetesSecrets: []accessor.ImagePullSecret{secret},
	})
	if err := records.Close(); err != nil {
		panic(err)
	}

	// After a restart.
	records, err = recordsdir.Open(ctx, stateDir, policy, nil)
	if err != nil {
		panic(err)
	}
	defer records.Close()
	withSecret := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return []accessor.ImagePullSecret{secret}, nil, nil
	}
	withoutSecret := func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return nil, nil, nil
	}
	mustPull, _ := records.Manager().MustAttemptImagePull(ctx, image, imageRef, withSecret)
	fmt.Println("pod with the secret must pull:", mustPull)
	mustPull, _ = records.Manager().MustAttemptImagePull(ctx, image, imageRef, withoutSecret)
	fmt.Println("pod without it must pull:", mustPull)
	// Output:
	// second writer locked out: true
	// pod with the secret must pull: false
	// pod without it must pull: true
}

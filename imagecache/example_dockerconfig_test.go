package imagecache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// A cache whose credentials come from a mounted kubernetes.io/dockerconfigjson
// secret rather than from fields of the cache: the manager reads the secret
// at each pull, picks the entry for the image's registry as the kubelet
// would, records the pull for the secret with the kubelet's credential hash,
// and keeps only the path in its state file.
func ExamplePullSecret_dockerConfigPath() {
	ctx := context.Background()
	logger := klog.Background()
	tmp, err := os.MkdirTemp("", "imagecache-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)

	// The secret volume as the kubelet lays it out: the data in a
	// timestamped directory, ..data linking to it, one link per key.
	secretDir := filepath.Join(tmp, "volumes", "regcred")
	data := filepath.Join(secretDir, "..2026_01_01_00_00_00.000000001")
	if err := os.MkdirAll(data, 0o755); err != nil {
		panic(err)
	}
	config := `{"auths":{"registry.example":{"auth":"cm9ib3Q6bm90LXByaW50ZWQ="}}}` // robot:not-printed
	if err := os.WriteFile(filepath.Join(data, ".dockerconfigjson"), []byte(config), 0o644); err != nil {
		panic(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(secretDir, "..data")); err != nil {
		panic(err)
	}
	if err := os.Symlink("..data/.dockerconfigjson", filepath.Join(secretDir, ".dockerconfigjson")); err != nil {
		panic(err)
	}

	_, runtime, stop := startRuntime() // the node's container runtime
	defer stop()
	records := memstore.New()
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	if err != nil {
		panic(err)
	}
	pulls, err := pullmanager.NewImagePullManager(ctx, records, policy, runtime)
	if err != nil {
		panic(err)
	}
	stateDir := filepath.Join(tmp, "state")
	done := make(chan imagecache.CacheStatus, 1)
	m, err := imagecache.New(logger, runtime, pulls, imagecache.WithStateDir(stateDir),
		imagecache.WithStatusHandler(func(s imagecache.CacheStatus) { done <- s }))
	if err != nil {
		panic(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = m.Run(runCtx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	secret := &imagecache.PullSecret{Namespace: "tenant-a", Name: "regcred", UID: "uid-a", DockerConfigPath: secretDir}
	err = m.Apply(ctx, imagecache.ImageCache{Namespace: "tenant-a", Name: "warm",
		Images: []string{"registry.example/tenant-a/app:1"}, PullSecret: secret})
	if err != nil {
		panic(err)
	}
	st := <-done
	fmt.Println(st.Results[0].Status, st.Results[0].Message)

	// The record names the secret with the hash the kubelet computes for
	// the entry's credential.
	recs, err := records.ListImagePulledRecords()
	if err != nil {
		panic(err)
	}
	kubeletHash := imageruntime.CredentialHash(imageruntime.AuthConfig{Username: "robot", Password: "not-printed"})
	for _, r := range recs {
		for name, c := range r.CredentialMapping {
			for _, s := range c.KubernetesSecrets {
				fmt.Printf("recorded %s for %s/%s, kubelet's hash: %t\n", name, s.Namespace, s.Name, s.CredentialHash == kubeletHash)
			}
		}
	}
	state, err := os.ReadFile(filepath.Join(stateDir, "imagecache-state.json"))
	if err != nil {
		panic(err)
	}
	fmt.Println("password in the state file:", bytes.Contains(state, []byte("not-printed")))

	// An image of a registry the secret has no entry for is not pulled,
	// and never anonymously.
	err = m.Apply(ctx, imagecache.ImageCache{Namespace: "tenant-a", Name: "other",
		Images: []string{"other.example/app:1"}, PullSecret: secret})
	if err != nil {
		panic(err)
	}
	st = <-done
	fmt.Println(st.Results[0].Status, st.Results[0].Reason)

	// Inline credentials and a path together are refused.
	both := *secret
	both.Username, both.Password = "robot", "not-printed"
	err = m.Apply(ctx, imagecache.ImageCache{Namespace: "tenant-a", Name: "both",
		Images: []string{"registry.example/tenant-a/app:1"}, PullSecret: &both})
	fmt.Println("refused:", errors.Is(err, imagecache.ErrInvalidPullSecret))
	// Output:
	// succeeded Pulled with the credentials of secret tenant-a/regcred (docker config entry "registry.example")
	// recorded registry.example/tenant-a/app for tenant-a/regcred, kubelet's hash: true
	// password in the state file: false
	// failed NoCredentialsForRegistry
	// refused: true
}

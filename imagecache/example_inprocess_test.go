package imagecache_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// The in-process wiring, as inside a kubelet built on this library: the
// process opens the pull records writable (taking their lock), puts the
// write-through cache and the pull manager on them (the same manager the
// kubelet's image manager asks), and gives that pull manager to the image
// cache. Every pull, private ones included, is then recorded where the
// kubelet's own checks look.
func ExampleNew_inProcess() {
	ctx := context.Background()
	logger := klog.Background()
	kubeletDir, err := os.MkdirTemp("", "kubelet")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(kubeletDir)
	_, runtime, stop := startRuntime() // the node's container runtime
	defer stop()

	// The one writer of <kubeletDir>/image_manager: holds the lock until Close.
	store, err := fsstore.New(logger, kubeletDir)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	records, err := memstore.NewCache(logger, store)
	if err != nil {
		panic(err)
	}
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.NeverVerifyPreloadedImages, nil)
	if err != nil {
		panic(err)
	}
	pulls, err := pullmanager.NewImagePullManager(ctx, records, policy, runtime)
	if err != nil {
		panic(err)
	}

	done := make(chan imagecache.CacheStatus, 1)
	m, err := imagecache.New(logger, runtime, pulls,
		imagecache.WithStateDir(filepath.Join(kubeletDir, "pullrecords", "imagecache")),
		imagecache.WithStatusHandler(func(s imagecache.CacheStatus) { done <- s }),
	)
	if err != nil {
		panic(err)
	}
	fmt.Println("mode:", m.Mode())
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = m.Run(runCtx); close(stopped) }()

	err = m.Apply(ctx, imagecache.ImageCache{
		Namespace: "tenant-a", Name: "warm",
		Images: []string{"registry.example/tenant-a/app:1"},
		PullSecret: &imagecache.PullSecret{Namespace: "tenant-a", Name: "regcred", UID: "uid-a",
			Username: "robot", Password: "not-printed"},
	})
	if err != nil {
		panic(err)
	}
	st := <-done
	fmt.Printf("%s %s: %d succeeded\n", st.ImageCache, st.WorkType, st.Counts[imagecache.StatusSucceeded])

	// Another process may read the records while the lock is held ...
	ro, err := fsstore.New(logger, kubeletDir, fsstore.WithReadOnly())
	if err != nil {
		panic(err)
	}
	recs, _ := ro.ListImagePulledRecords()
	for _, r := range recs {
		for name, c := range r.CredentialMapping {
			for _, s := range c.KubernetesSecrets {
				fmt.Printf("recorded %s for secret %s/%s only\n", name, s.Namespace, s.Name)
			}
		}
	}
	ro.Close()
	// ... but not open them for writing.
	_, err = fsstore.New(logger, kubeletDir)
	fmt.Println("second writer locked out:", errors.Is(err, fsstore.ErrLocked))

	cancel()
	<-stopped
	// Output:
	// mode: in-process
	// tenant-a/warm create: 1 succeeded
	// recorded registry.example/tenant-a/app for secret tenant-a/regcred only
	// second writer locked out: true
}

// A standalone manager (for a process beside a kubelet it does not control)
// records nothing and refuses a cache with a pull secret.
func ExampleNewStandalone() {
	_, runtime, stop := startRuntime()
	defer stop()
	m, err := imagecache.NewStandalone(klog.Background(), runtime)
	if err != nil {
		panic(err)
	}
	fmt.Println("mode:", m.Mode())
	err = m.Apply(context.Background(), imagecache.ImageCache{
		Namespace: "tenant-a", Name: "warm", Images: []string{"registry.example/tenant-a/app:1"},
		PullSecret: &imagecache.PullSecret{Namespace: "tenant-a", Name: "regcred", Username: "robot", Password: "not-printed"},
	})
	var pe *imagecache.PrivateImageError
	fmt.Println("refused:", errors.Is(err, imagecache.ErrPrivateImage), errors.As(err, &pe) && pe.Secret == "tenant-a/regcred")
	// Output:
	// mode: standalone
	// refused: true true
}

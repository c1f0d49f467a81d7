package fsstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
)

// Open the store in a kubelet root directory, record a pull and read it back.
func Example() {
	kubeletDir, err := os.MkdirTemp("", "kubelet")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(kubeletDir)
	logger := klog.Background()

	store, err := fsstore.New(logger, kubeletDir)
	if err != nil {
		panic(err)
	}
	defer store.Close()

	// Before a pull: an intent for the pod's image string.
	if err := store.WriteImagePullIntent(logger, "registry.example.com/team/app:v1"); err != nil {
		panic(err)
	}
	// After the pull: the record for the image ID, then the intent goes.
	err = store.WriteImagePulledRecord(logger, &accessor.ImagePulledRecord{
		LastUpdatedTime: metav1.NewTime(time.Date(2025, 3, 1, 9, 30, 0, 0, time.UTC)),
		ImageRef:        "sha256:1234",
		CredentialMapping: map[string]accessor.ImagePullCredentials{
			"registry.example.com/team/app": {KubernetesSecrets: []accessor.ImagePullSecret{
				{UID: "uid-1", Namespace: "team", Name: "pull", CredentialHash: "h"},
			}},
		},
	})
	if err != nil {
		panic(err)
	}
	if err := store.DeleteImagePullIntent(logger, "registry.example.com/team/app:v1"); err != nil {
		panic(err)
	}

	rec, found, err := store.GetImagePulledRecord("sha256:1234")
	if err != nil {
		panic(err)
	}
	fmt.Println(found, rec.CredentialMapping["registry.example.com/team/app"].KubernetesSecrets[0].Name)
	fmt.Println(store.CountImagePullIntents(), store.CountImagePulledRecords())

	// The file is where the kubelet keeps it, under the hash of the key.
	data, err := os.ReadFile(filepath.Join(kubeletDir, fsstore.DirName, fsstore.RecordsDir, fsstore.FileName("sha256:1234")))
	if err != nil {
		panic(err)
	}
	fmt.Print(string(data))
	// Output:
	// true pull
	// 0 1
	// {"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"2025-03-01T09:30:00Z","imageRef":"sha256:1234","credentialMapping":{"registry.example.com/team/app":{"kubernetesSecrets":[{"uid":"uid-1","namespace":"team","name":"pull","credentialHash":"h"}]}}}
}

// Inspect a node's records without changing them, then repair what is wrong.
func ExampleInspect() {
	kubeletDir, err := os.MkdirTemp("", "kubelet")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(kubeletDir)
	store, err := fsstore.New(klog.Background(), kubeletDir)
	if err != nil {
		panic(err)
	}
	store.Close()
	// A torn file, as a crash of an older kubelet could leave.
	torn := filepath.Join(kubeletDir, fsstore.DirName, fsstore.RecordsDir, fsstore.FileName("sha256:1234"))
	if err := os.WriteFile(torn, []byte(`{"kind":"ImagePulledRecord","apiVer`), 0o600); err != nil {
		panic(err)
	}

	report, err := fsstore.Inspect(kubeletDir)
	if err != nil {
		panic(err)
	}
	for _, f := range report.Files {
		fmt.Println(f.Dir, f.Problem)
	}
	moved, err := fsstore.Repair(klog.Background(), kubeletDir, report)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(moved), "moved to", fsstore.DirName+"/quarantine")
	// Output:
	// pulled Corrupt
	// 1 moved to image_manager/quarantine
}

package kubeletadapter_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
)

// TestServiceAccountCredentials: service-account credentials (KEP-4412)
// reach the pull manager only from a credential provider plugin, which the
// image manager cannot run in a unit test; so this drives the pull manager
// interface directly, with what the image manager would pass, in the three
// wirings, and compares decisions and files.
func TestServiceAccountCredentials(t *testing.T) {
	enableGate(t)
	const image, ref = privateImg, "sha256:app"
	sa := kubeletconfig.ImagePullServiceAccount{UID: "sa-uid", Namespace: "ns1", Name: "builder"}
	saRenamedUID := kubeletconfig.ImagePullServiceAccount{UID: "sa-uid-2", Namespace: "ns1", Name: "builder"}
	saOther := kubeletconfig.ImagePullServiceAccount{UID: "sa-uid-3", Namespace: "ns2", Name: "builder"}
	secret := kubeletconfig.ImagePullSecret{UID: "s", Namespace: "ns1", Name: "pull", CredentialHash: "h"}

	type ask struct {
		name    string
		secrets []kubeletconfig.ImagePullSecret
		sa      *kubeletconfig.ImagePullServiceAccount
	}
	asks := []ask{
		{"same service account", nil, &sa},
		{"same name, new UID", nil, &saRenamedUID},
		{"other namespace", nil, &saOther},
		{"a secret only", []kubeletconfig.ImagePullSecret{secret}, nil},
		{"nothing", nil, nil},
		{"secret and the service account", []kubeletconfig.ImagePullSecret{secret}, &sa},
	}
	results := map[wiring][]string{}
	contents := map[wiring]map[string]string{}
	for _, w := range wirings {
		dir := t.TempDir()
		n := newNode(t, w, dir, newFakeRuntime(), kubeletconfig.AlwaysVerify, nil)
		logger := klog.FromContext(n.ctx)
		if err := n.pm.RecordPullIntent(logger, image); err != nil {
			t.Fatal(err)
		}
		n.pm.RecordImagePulled(n.ctx, image, ref, &kubeletconfig.ImagePullCredentials{
			KubernetesServiceAccounts: []kubeletconfig.ImagePullServiceAccount{sa},
		})
		for _, a := range asks {
			calls := 0
			must, err := n.pm.MustAttemptImagePull(n.ctx, image, ref, func() ([]kubeletconfig.ImagePullSecret, *kubeletconfig.ImagePullServiceAccount, error) {
				calls++
				return a.secrets, a.sa, nil
			})
			results[w] = append(results[w], fmt.Sprintf("%s: must pull %v, err %v, asked %d", a.name, must, err, calls))
		}
		// A second service account joins the record.
		if err := n.pm.RecordPullIntent(logger, image); err != nil {
			t.Fatal(err)
		}
		n.pm.RecordImagePulled(n.ctx, image, ref, &kubeletconfig.ImagePullCredentials{
			KubernetesServiceAccounts: []kubeletconfig.ImagePullServiceAccount{saOther},
		})
		contents[w] = files(t, dir)
	}
	logRun(t, run{Files: contents[kubelet]})
	for _, w := range []wiring{library, mixed} {
		if diff := cmp.Diff(results[kubelet], results[w]); diff != "" {
			t.Errorf("decisions (-kubelet +%s):\n%s", w, diff)
		}
		if diff := cmp.Diff(contents[kubelet], contents[w]); diff != "" {
			t.Errorf("files (-kubelet +%s):\n%s", w, diff)
		}
	}
	if testing.Verbose() {
		for _, r := range results[kubelet] {
			t.Log(r)
		}
	}
}

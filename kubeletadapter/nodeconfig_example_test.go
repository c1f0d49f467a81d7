package kubeletadapter_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pullrecords/pullrecords/kubeletadapter"
)

// A node's owner turns on the kubernetes#138175 fix for one node by writing
// the node configuration under the kubelet's root directory; the fork's
// NewForKubelet reads it at start-up and passes ManagerOptions to the
// manager.
func ExampleReadNodeConfig() {
	root, err := os.MkdirTemp("", "kubelet")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)
	path := kubeletadapter.NodeConfigPath(root)

	// No file: every switch off, as a stock kubelet.
	config, err := kubeletadapter.ReadNodeConfig(path)
	fmt.Printf("no file: %q, %v\n", config.Switches(), err)

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fmt.Println(err)
		return
	}
	content := "apiVersion: pullrecords.io/v1alpha1\n" +
		"kind: NodeConfiguration\n" +
		"preloadedImageProtection: true\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	config, err = kubeletadapter.ReadNodeConfig(path)
	fmt.Printf("switches on: %q, %v\n", config.Switches(), err)

	// A typo is a start-up error, never a silent "off".
	if err := os.WriteFile(path, []byte(content+"normalisedImageNames: true\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	_, err = kubeletadapter.ReadNodeConfig(path)
	fmt.Println(err != nil)
	// Output:
	// no file: [], <nil>
	// switches on: ["preloadedImageProtection"], <nil>
	// true
}

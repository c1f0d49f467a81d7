package kubeletadapter_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pullrecords/pullrecords/kubeletadapter"
)

const configHeader = "apiVersion: pullrecords.io/v1alpha1\nkind: NodeConfiguration\n"

// writeNodeConfig writes content as the node configuration under root.
func writeNodeConfig(t *testing.T, root, content string) string {
	t.Helper()
	path := kubeletadapter.NodeConfigPath(root)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNodeConfigPath(t *testing.T) {
	if got, want := kubeletadapter.NodeConfigPath("/var/lib/kubelet"), filepath.FromSlash("/var/lib/kubelet/pullrecords/config.yaml"); got != want {
		t.Errorf("NodeConfigPath = %q, want %q", got, want)
	}
}

func TestReadNodeConfigValid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		want    kubeletadapter.NodeConfig
	}{
		{"header alone: all off", configHeader, kubeletadapter.NodeConfig{}},
		{"both on", configHeader + "preloadedImageProtection: true\nnormalizedImageNames: true\n",
			kubeletadapter.NodeConfig{PreloadedImageProtection: true, NormalizedImageNames: true}},
		{"protection only", configHeader + "preloadedImageProtection: true\n",
			kubeletadapter.NodeConfig{PreloadedImageProtection: true}},
		{"normalised names only, protection explicitly off", configHeader + "preloadedImageProtection: false\nnormalizedImageNames: true\n",
			kubeletadapter.NodeConfig{NormalizedImageNames: true}},
		{"comments, document marker, other key order", "---\n# node-owned\nkind: NodeConfiguration   # kind\nnormalizedImageNames: true\napiVersion: pullrecords.io/v1alpha1\n",
			kubeletadapter.NodeConfig{NormalizedImageNames: true}},
		{"JSON is YAML", `{"apiVersion":"pullrecords.io/v1alpha1","kind":"NodeConfiguration","preloadedImageProtection":true}`,
			kubeletadapter.NodeConfig{PreloadedImageProtection: true}},
		{"credential expiry", configHeader + "credentialExpiry: 12h\n",
			kubeletadapter.NodeConfig{CredentialExpiry: 12 * time.Hour}},
		{"credential expiry at the minimum, quoted", configHeader + "credentialExpiry: \"1s\"\n",
			kubeletadapter.NodeConfig{CredentialExpiry: time.Second}},
		{"image cache file", configHeader + "imageCacheFile: /etc/pullrecords/caches.yaml\n",
			kubeletadapter.NodeConfig{ImageCacheFile: "/etc/pullrecords/caches.yaml"}},
		{"every switch", configHeader + "preloadedImageProtection: true\nnormalizedImageNames: true\ncredentialExpiry: 90m\nimageCacheFile: /c.yaml\n",
			kubeletadapter.NodeConfig{PreloadedImageProtection: true, NormalizedImageNames: true, CredentialExpiry: 90 * time.Minute, ImageCacheFile: "/c.yaml"}},
		{"exactly the size limit", configHeader + "preloadedImageProtection: true\n#" +
			strings.Repeat("x", kubeletadapter.MaxNodeConfigSize-len(configHeader)-len("preloadedImageProtection: true\n#")),
			kubeletadapter.NodeConfig{PreloadedImageProtection: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeNodeConfig(t, t.TempDir(), tc.content)
			got, err := kubeletadapter.ReadNodeConfig(path)
			if err != nil {
				t.Fatalf("ReadNodeConfig: %v", err)
			}
			tc.want.Path = path
			if got != tc.want {
				t.Errorf("ReadNodeConfig = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// No file is the kubelet's behaviour, every switch off, and not an error:
// a node that never asked for a switch must start as it always did.
func TestReadNodeConfigAbsent(t *testing.T) {
	root := t.TempDir()
	for name, path := range map[string]string{
		"no directory":               kubeletadapter.NodeConfigPath(root),
		"directory without the file": filepath.Join(root, "config.yaml"),
		"no path":                    "",
	} {
		got, err := kubeletadapter.ReadNodeConfig(path)
		if err != nil || got != (kubeletadapter.NodeConfig{}) {
			t.Errorf("%s: ReadNodeConfig(%q) = %+v, %v; want the zero configuration, nil", name, path, got, err)
		}
	}
}

// Every way a file can be unusable is an error naming the file and the
// problem, never a default.
func TestReadNodeConfigInvalid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		problem string // in the message, after the path
	}{
		{"empty", "", "the file is empty"},
		{"whitespace and comments only", "\n  \n# preloadedImageProtection: true\n", "the file is empty"},
		{"unknown field", configHeader + "preloadedImageProtections: true\n", `unknown field "preloadedImageProtections"`},
		{"field of another case", configHeader + "PreloadedImageProtection: true\n", `unknown field "PreloadedImageProtection"`},
		{"credential expiry without a unit", configHeader + "credentialExpiry: 3600\n", "credentialExpiry"},
		{"credential expiry not a duration", configHeader + "credentialExpiry: one day\n", `credentialExpiry "one day" is not a duration`},
		{"credential expiry of days", configHeader + "credentialExpiry: 1d\n", `credentialExpiry "1d" is not a duration`},
		{"credential expiry zero", configHeader + "credentialExpiry: 0s\n", `credentialExpiry "0s" is below 1s; to keep credentials from expiring, leave the key out`},
		{"credential expiry negative", configHeader + "credentialExpiry: -5m\n", `credentialExpiry "-5m" is below 1s`},
		{"credential expiry too short", configHeader + "credentialExpiry: 500ms\n", `credentialExpiry "500ms" is below 1s`},
		{"credential expiry null", configHeader + "credentialExpiry:\n", "credentialExpiry has no value"},
		{"image cache file relative", configHeader + "imageCacheFile: caches.yaml\n", `imageCacheFile "caches.yaml" is not an absolute, clean path`},
		{"image cache file unclean", configHeader + "imageCacheFile: /etc/../etc/c.yaml\n", `imageCacheFile "/etc/../etc/c.yaml" is not an absolute, clean path`},
		{"image cache file empty", configHeader + "imageCacheFile: \"\"\n", `imageCacheFile "" is not an absolute, clean path`},
		{"image cache file a list", configHeader + "imageCacheFile: [/c.yaml]\n", "imageCacheFile"},
		{"duplicate key", configHeader + "preloadedImageProtection: true\npreloadedImageProtection: false\n", "already set in map"},
		{"duplicate key in JSON", `{"apiVersion":"pullrecords.io/v1alpha1","kind":"NodeConfiguration","normalizedImageNames":false,"normalizedImageNames":true}`, "already set in map"},
		{"no apiVersion", "kind: NodeConfiguration\npreloadedImageProtection: true\n", `apiVersion "", want "pullrecords.io/v1alpha1"`},
		{"other apiVersion", "apiVersion: pullrecords.io/v1\nkind: NodeConfiguration\n", `apiVersion "pullrecords.io/v1", want "pullrecords.io/v1alpha1"`},
		{"kubelet's apiVersion", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: NodeConfiguration\n", `apiVersion "kubelet.config.k8s.io/v1beta1"`},
		{"no kind", "apiVersion: pullrecords.io/v1alpha1\npreloadedImageProtection: true\n", `kind "", want "NodeConfiguration"`},
		{"other kind", "apiVersion: pullrecords.io/v1alpha1\nkind: KubeletConfiguration\n", `kind "KubeletConfiguration", want "NodeConfiguration"`},
		{"quoted string for a switch", configHeader + "preloadedImageProtection: \"true\"\n", "preloadedImageProtection"},
		{"number for a switch", configHeader + "normalizedImageNames: 1\n", "normalizedImageNames"},
		{"list for a switch", configHeader + "normalizedImageNames: [true]\n", "normalizedImageNames"},
		{"switch without a value", configHeader + "preloadedImageProtection:\n", "preloadedImageProtection has no value"},
		{"switch set to null", configHeader + "normalizedImageNames: null\n", "normalizedImageNames has no value"},
		{"number for apiVersion", "apiVersion: 1\nkind: NodeConfiguration\n", "apiVersion"},
		{"top-level list", "- apiVersion: pullrecords.io/v1alpha1\n", "want a YAML mapping"},
		{"top-level scalar", "true\n", "want a YAML mapping"},
		{"a second document", configHeader + "---\n" + configHeader + "preloadedImageProtection: true\n", "holds 2 YAML documents; want one"},
		{"an empty second document", configHeader + "preloadedImageProtection: true\n---\n", "holds 2 YAML documents; want one"},
		{"broken YAML", configHeader + "preloadedImageProtection: [true\n", "not valid YAML"},
		{"tab indentation", configHeader + "\tpreloadedImageProtection: true\n", "not valid YAML"},
		{"over the size limit", configHeader + "#" + strings.Repeat("x", kubeletadapter.MaxNodeConfigSize), "larger than 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeNodeConfig(t, t.TempDir(), tc.content)
			wantInvalid(t, path, tc.problem)
		})
	}
}

// wantInvalid asserts that ReadNodeConfig refuses path with an error
// matching ErrInvalidNodeConfig that names the file and contains problem.
func wantInvalid(t *testing.T, path, problem string) {
	t.Helper()
	got, err := kubeletadapter.ReadNodeConfig(path)
	if err == nil {
		t.Fatalf("ReadNodeConfig accepted it: %+v", got)
	}
	t.Log(err)
	if !errors.Is(err, kubeletadapter.ErrInvalidNodeConfig) {
		t.Errorf("error %q does not match ErrInvalidNodeConfig", err)
	}
	prefix := "pullrecords node configuration " + path + ": "
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(strings.TrimPrefix(msg, prefix), problem) {
		t.Errorf("error %q: want %q followed by a message containing %q", msg, prefix, problem)
	}
	if got != (kubeletadapter.NodeConfig{}) {
		t.Errorf("with the error came %+v, want the zero configuration", got)
	}
}

// Only a regular file counts: a symbolic link (even to a valid file), a
// directory or a path through a file are errors, not "no file".
func TestReadNodeConfigNotARegularFile(t *testing.T) {
	t.Run("symbolic link to a valid file", func(t *testing.T) {
		root := t.TempDir()
		target := filepath.Join(root, "elsewhere.yaml")
		if err := os.WriteFile(target, []byte(configHeader+"preloadedImageProtection: true\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		path := kubeletadapter.NodeConfigPath(root)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		wantInvalid(t, path, "is a symbolic link")
	})
	t.Run("dangling symbolic link", func(t *testing.T) {
		root := t.TempDir()
		path := kubeletadapter.NodeConfigPath(root)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(root, "missing.yaml"), path); err != nil {
			t.Fatal(err)
		}
		wantInvalid(t, path, "is a symbolic link")
	})
	t.Run("directory", func(t *testing.T) {
		path := kubeletadapter.NodeConfigPath(t.TempDir())
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		wantInvalid(t, path, "is a directory")
	})
	t.Run("a file where the directory should be", func(t *testing.T) {
		root := t.TempDir()
		path := kubeletadapter.NodeConfigPath(root)
		if err := os.WriteFile(filepath.Dir(path), []byte(configHeader), 0o644); err != nil {
			t.Fatal(err)
		}
		wantInvalid(t, path, "not a directory")
	})
}

func TestNodeConfigSwitches(t *testing.T) {
	for _, tc := range []struct {
		config kubeletadapter.NodeConfig
		want   []string
	}{
		{kubeletadapter.NodeConfig{}, nil},
		{kubeletadapter.NodeConfig{PreloadedImageProtection: true}, []string{"preloadedImageProtection"}},
		{kubeletadapter.NodeConfig{NormalizedImageNames: true}, []string{"normalizedImageNames"}},
		{kubeletadapter.NodeConfig{PreloadedImageProtection: true, NormalizedImageNames: true}, []string{"preloadedImageProtection", "normalizedImageNames"}},
		{kubeletadapter.NodeConfig{CredentialExpiry: 36 * time.Hour, ImageCacheFile: "/c.yaml"}, []string{"credentialExpiry=36h0m0s", "imageCacheFile=/c.yaml"}},
	} {
		got := tc.config.Switches()
		if strings.Join(got, ",") != strings.Join(tc.want, ",") || (got == nil) != (tc.want == nil) {
			t.Errorf("%+v.Switches() = %q, want %q", tc.config, got, tc.want)
		}
		if n := len(tc.config.ManagerOptions()); n != 2 {
			t.Errorf("%+v.ManagerOptions() has %d options, want one per switch (2)", tc.config, n)
		}
	}
}

package kubeletadapter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	goyaml "go.yaml.in/yaml/v2"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/atomicfile"
	"github.com/pullrecords/pullrecords/pullmanager"
	"github.com/pullrecords/pullrecords/recordsdir"
)

// The node configuration file's identity and limits.
const (
	// NodeConfigAPIVersion is the only apiVersion ReadNodeConfig accepts.
	NodeConfigAPIVersion = "pullrecords.io/v1alpha1"
	// NodeConfigKind is the only kind ReadNodeConfig accepts.
	NodeConfigKind = "NodeConfiguration"
	// MaxNodeConfigSize is the largest node configuration file, in bytes,
	// ReadNodeConfig reads; a larger one is an error, not truncated.
	MaxNodeConfigSize = 64 << 10
	// MinCredentialExpiry is the shortest credentialExpiry the file may
	// set: below it nearly every pod start would pull again.
	MinCredentialExpiry = time.Second
)

// NodeConfigPath is where NewForKubelet looks for the node configuration
// unless WithNodeConfigPath says otherwise:
// <rootDirectory>/pullrecords/config.yaml, under the kubelet's root
// directory, beside the image_manager directory whose records it governs.
func NodeConfigPath(rootDirectory string) string {
	return filepath.Join(rootDirectory, "pullrecords", "config.yaml")
}

// CredentialProofsDir is where NewForKubelet keeps the proofs of pull
// credentials when the node configuration sets credentialExpiry:
// <rootDirectory>/pullrecords/credential-proofs, beside the configuration
// and outside image_manager, whose files stay the kubelet's.
func CredentialProofsDir(rootDirectory string) string {
	return recordsdir.CredentialProofsDir(rootDirectory)
}

// NodeConfig is the per-node choice of the library's deliberate
// differences from the kubelet. The zero value turns every one off: the
// manager then decides as the kubelet v1.37.2 does.
type NodeConfig struct {
	// Path is the file the configuration was read from, or "" when no file
	// was read (none at the path, or no path given).
	Path string
	// PreloadedImageProtection turns on the fix for kubernetes#138175
	// (pullmanager.WithPreloadedImageProtection).
	PreloadedImageProtection bool
	// NormalizedImageNames keys credential mappings by the fully qualified
	// repository name (pullmanager.WithNormalizedImageNames).
	NormalizedImageNames bool
	// CredentialExpiry, when above zero, is how long a pod's credential
	// vouches for an image after it last pulled it
	// (pullmanager.WithCredentialExpiry); zero means never expire, as the
	// kubelet.
	CredentialExpiry time.Duration
	// ImageCacheFile, when not empty, is the absolute path of a cache file
	// (the format of "pullrecords cache run") whose image caches the
	// kubelet keeps in process, over its own image service and pull manager.
	ImageCacheFile string
}

// nodeConfigFile is the file's schema. The switches are pointers so that a
// key given with no value (YAML null) is told apart from an absent key and
// refused.
type nodeConfigFile struct {
	APIVersion               string  `json:"apiVersion"`
	Kind                     string  `json:"kind"`
	PreloadedImageProtection *bool   `json:"preloadedImageProtection"`
	NormalizedImageNames     *bool   `json:"normalizedImageNames"`
	CredentialExpiry         *string `json:"credentialExpiry"`
	ImageCacheFile           *string `json:"imageCacheFile"`
}

// nodeConfigKeys are the file's optional keys, in the order the format
// lists them.
var nodeConfigKeys = []string{"preloadedImageProtection", "normalizedImageNames", "credentialExpiry", "imageCacheFile"}

// ManagerOptions returns the pullmanager options that put the two name
// switches of c in force, off ones included, so that given after any other
// options they alone decide those switches (NewForKubelet passes them
// last). CredentialExpiry needs a stamp store and ImageCacheFile a running
// cache: NewForKubelet puts those in force itself.
func (c NodeConfig) ManagerOptions() []pullmanager.Option {
	return []pullmanager.Option{
		pullmanager.WithPreloadedImageProtection(c.PreloadedImageProtection),
		pullmanager.WithNormalizedImageNames(c.NormalizedImageNames),
	}
}

// Switches returns the file names of the switches that are on, in the
// order the file format lists them, the valued ones as name=value; nil
// when all are off.
func (c NodeConfig) Switches() []string {
	var on []string
	if c.PreloadedImageProtection {
		on = append(on, "preloadedImageProtection")
	}
	if c.NormalizedImageNames {
		on = append(on, "normalizedImageNames")
	}
	if c.CredentialExpiry > 0 {
		on = append(on, "credentialExpiry="+c.CredentialExpiry.String())
	}
	if c.ImageCacheFile != "" {
		on = append(on, "imageCacheFile="+c.ImageCacheFile)
	}
	return on
}

// ReadNodeConfig reads the node configuration at path. No file at path
// (or an empty path) is not an error: it returns the zero NodeConfig, every
// switch off. Anything else that keeps the file from being used is an error
// matching ErrInvalidNodeConfig whose message starts with
// "pullrecords node configuration <path>: " and says what is wrong.
//
// The format is strict: YAML (the kubelet's own configuration dialect,
// sigs.k8s.io/yaml) holding one mapping with apiVersion
// NodeConfigAPIVersion, kind NodeConfigKind and optionally the boolean
// switches preloadedImageProtection and normalizedImageNames. Unknown or
// differently cased keys, duplicate keys, a null or non-boolean value, more
// than one YAML document, a file of no content (empty, or only whitespace and comments), more than
// MaxNodeConfigSize bytes, and a symbolic link, directory or other
// non-regular file at path are all errors. An empty file is refused
// because it is what an interrupted or truncated write leaves behind: the
// node's owner asked for something, and "all off" must be said explicitly
// (by the header alone, or by removing the file), never inferred.
func ReadNodeConfig(path string) (NodeConfig, error) {
	if path == "" {
		return NodeConfig{}, nil
	}
	data, err := readNodeConfigFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NodeConfig{}, nil
	}
	if err != nil {
		return NodeConfig{}, err
	}
	return parseNodeConfig(path, data)
}

// nodeConfigError is an ErrInvalidNodeConfig for one file.
type nodeConfigError struct {
	path    string
	problem string
	cause   error
}

func (e *nodeConfigError) Error() string {
	return "pullrecords node configuration " + e.path + ": " + e.problem
}

func (e *nodeConfigError) Is(target error) bool { return target == ErrInvalidNodeConfig }

func (e *nodeConfigError) Unwrap() error { return e.cause }

func invalidNodeConfig(path string, cause error, format string, args ...any) error {
	return &nodeConfigError{path: path, problem: fmt.Sprintf(format, args...), cause: cause}
}

// readNodeConfigFile returns the bytes of the regular file at path, or an
// error wrapping fs.ErrNotExist when nothing is there. atomicfile.ReadFile
// reads it without following a symbolic link and checks the type of the
// file it opened, so nothing swapped in between is read; what it refused is
// then named from a look at path.
func readNodeConfigFile(path string) ([]byte, error) {
	data, err := atomicfile.ReadFile(filepath.Dir(path), filepath.Base(path), MaxNodeConfigSize)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, err
	case errors.Is(err, atomicfile.ErrTooLarge):
		return nil, invalidNodeConfig(path, nil, "larger than %d bytes", MaxNodeConfigSize)
	}
	if info, lerr := os.Lstat(path); lerr == nil {
		if cerr := checkRegular(path, info); cerr != nil {
			return nil, cerr
		}
	}
	return nil, invalidNodeConfig(path, err, "%v", err)
}

// checkRegular refuses anything but a regular file, naming what is there.
func checkRegular(path string, info fs.FileInfo) error {
	mode := info.Mode()
	switch {
	case mode.IsRegular():
		return nil
	case mode&fs.ModeSymlink != 0:
		return invalidNodeConfig(path, nil, "is a symbolic link; want a regular file (symbolic links are not followed)")
	case mode.IsDir():
		return invalidNodeConfig(path, nil, "is a directory; want a regular file")
	default:
		return invalidNodeConfig(path, nil, "is not a regular file (mode %v)", mode)
	}
}

// countYAMLDocuments returns how many YAML documents data holds.
func countYAMLDocuments(data []byte) (int, error) {
	dec := goyaml.NewDecoder(bytes.NewReader(data))
	for n := 0; ; n++ {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// parseNodeConfig decodes data, read from path, strictly.
func parseNodeConfig(path string, data []byte) (NodeConfig, error) {
	// yaml.v2 reads the first document of a stream and drops the rest
	// unseen; a second document must not be a switch silently ignored.
	if n, err := countYAMLDocuments(data); err != nil {
		return NodeConfig{}, invalidNodeConfig(path, err, "not valid YAML: %v", err)
	} else if n > 1 {
		return NodeConfig{}, invalidNodeConfig(path, nil, "holds %d YAML documents; want one", n)
	}
	// YAMLToJSONStrict refuses duplicate keys; the case-sensitive strict
	// JSON decoder then refuses unknown keys (encoding/json would match
	// "PreloadedImageProtection" to the field) and wrong types.
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return NodeConfig{}, invalidNodeConfig(path, err, "not valid YAML: %v", err)
	}
	if t := bytes.TrimSpace(j); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return NodeConfig{}, invalidNodeConfig(path, nil,
			"the file is empty (a truncated write?); to turn every switch off, write apiVersion %q and kind %q alone, or remove the file",
			NodeConfigAPIVersion, NodeConfigKind)
	}
	if j[0] != '{' {
		return NodeConfig{}, invalidNodeConfig(path, nil, "want a YAML mapping of apiVersion, kind and switches at the top level")
	}
	var file nodeConfigFile
	strict, err := kjson.UnmarshalStrict(j, &file, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return NodeConfig{}, invalidNodeConfig(path, err, "%v", err)
	}
	if len(strict) > 0 {
		problems := make([]string, len(strict))
		for i, e := range strict {
			problems[i] = e.Error()
		}
		return NodeConfig{}, invalidNodeConfig(path, errors.Join(strict...), "%s", strings.Join(problems, "; "))
	}
	if file.APIVersion != NodeConfigAPIVersion {
		return NodeConfig{}, invalidNodeConfig(path, nil, "apiVersion %q, want %q", file.APIVersion, NodeConfigAPIVersion)
	}
	if file.Kind != NodeConfigKind {
		return NodeConfig{}, invalidNodeConfig(path, nil, "kind %q, want %q", file.Kind, NodeConfigKind)
	}
	// The JSON of a YAML null leaves the pointer nil, exactly as an absent
	// key does; tell them apart on the decoded mapping.
	var present map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &present); err != nil {
		return NodeConfig{}, invalidNodeConfig(path, err, "%v", err)
	}
	for _, key := range nodeConfigKeys {
		if v, ok := present[key]; ok && v == nil {
			return NodeConfig{}, invalidNodeConfig(path, nil, "%s has no value", key)
		}
	}
	c := NodeConfig{
		Path:                     path,
		PreloadedImageProtection: file.PreloadedImageProtection != nil && *file.PreloadedImageProtection,
		NormalizedImageNames:     file.NormalizedImageNames != nil && *file.NormalizedImageNames,
	}
	if s := file.CredentialExpiry; s != nil {
		d, err := time.ParseDuration(*s)
		switch {
		case err != nil:
			return NodeConfig{}, invalidNodeConfig(path, err, "credentialExpiry %q is not a duration (want e.g. \"12h\" or \"30m\")", *s)
		case d < MinCredentialExpiry:
			return NodeConfig{}, invalidNodeConfig(path, nil,
				"credentialExpiry %q is below %v; to keep credentials from expiring, leave the key out", *s, MinCredentialExpiry)
		}
		c.CredentialExpiry = d
	}
	if p := file.ImageCacheFile; p != nil {
		if !filepath.IsAbs(*p) || filepath.Clean(*p) != *p {
			return NodeConfig{}, invalidNodeConfig(path, nil, "imageCacheFile %q is not an absolute, clean path", *p)
		}
		c.ImageCacheFile = *p
	}
	return c, nil
}

package demo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/distribution/reference"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/imageruntime"
)

// repo is what the fake registry serves under one repository name.
type repo struct {
	public   bool
	hashes   []string                           // credential hashes allowed to pull
	accounts []accessor.ImagePullServiceAccount // service accounts allowed to pull
	// sameAs, if set, is the tag whose content this repository serves (a
	// mirror): pulling gives the same image ID under a second name.
	sameAs string
}

// fakeRuntime is a container runtime and the registries behind it. It
// implements imageruntime.ImageLister.
type fakeRuntime struct {
	mu     sync.Mutex
	images map[string]*imageruntime.Image // by ID
	repos  map[string]repo                // by normalised name
	// pulledBy tells, per image ID, which pod first pulled the content with
	// its own credentials (a secret or a service account), and with which.
	pulledBy map[string]privatePull
}

// privatePull is a pull made with a pod's private credentials.
type privatePull struct {
	pod  string // namespace/name
	with string // "with secret ns/name", "with service account ns/name"
}

var _ imageruntime.ImageLister = (*fakeRuntime)(nil)

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{images: map[string]*imageruntime.Image{}, repos: map[string]repo{}, pulledBy: map[string]privatePull{}}
}

// imageID is the deterministic ID of the content a tag names.
func imageID(tagged string) string {
	sum := sha256.Sum256([]byte("demo content of " + tagged))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ImageRef returns the image ID the demo's runtime gives image once pulled
// or preloaded ("" for an image name that does not parse).
func ImageRef(image string) string {
	tag, err := canonicalTag(image)
	if err != nil {
		return ""
	}
	return imageID(tag)
}

// canonicalTag returns the fully qualified name:tag form the runtime reports.
func canonicalTag(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", err
	}
	return reference.TagNameOnly(named).String(), nil
}

// preload puts an image on the node without the kubelet (a node image build,
// "ctr images import", ...).
func (r *fakeRuntime) preload(image string) string {
	tag, err := canonicalTag(image)
	if err != nil {
		panic(err) // the scenario is fixed
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addLocked(tag, tag)
}

// addLocked adds tag to the image holding content's content.
func (r *fakeRuntime) addLocked(tag, content string) string {
	id := imageID(content)
	img, ok := r.images[id]
	if !ok {
		img = &imageruntime.Image{ID: id}
		r.images[id] = img
	}
	if !slices.Contains(img.RepoTags, tag) {
		img.RepoTags = append(img.RepoTags, tag)
	}
	return id
}

// ListImages lists the images on the node, sorted by ID.
func (r *fakeRuntime) ListImages(context.Context) ([]imageruntime.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]imageruntime.Image, 0, len(r.images))
	for _, img := range r.images {
		out = append(out, imageruntime.Image{
			ID:          img.ID,
			RepoTags:    slices.Clone(img.RepoTags),
			RepoDigests: slices.Clone(img.RepoDigests),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// imageRef returns the ID of the image present under image's tag, or "".
func (r *fakeRuntime) imageRef(image string) string {
	tag, err := canonicalTag(image)
	if err != nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, img := range r.images {
		if slices.Contains(img.RepoTags, tag) {
			return img.ID
		}
	}
	return ""
}

// remove deletes an image, as image garbage collection does.
func (r *fakeRuntime) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.images, id)
	delete(r.pulledBy, id)
}

// serve declares a repository in the fake registry.
func (r *fakeRuntime) serve(name string, rp repo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.repos[name] = rp
}

// pull pulls image with the first credential of the pod the registry accepts,
// as the kubelet's keyring does, and returns the image ID and the credential
// used, in the form the kubelet records.
func (r *fakeRuntime) pull(image string, pod Pod) (string, *accessor.ImagePullCredentials, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", nil, err
	}
	tag := reference.TagNameOnly(named).String()
	r.mu.Lock()
	defer r.mu.Unlock()
	rp, ok := r.repos[named.Name()]
	if !ok {
		return "", nil, fmt.Errorf("%w: %s", ErrUnknownImage, image)
	}
	var used *accessor.ImagePullCredentials
	for _, s := range pod.Secrets {
		if slices.Contains(rp.hashes, s.CredentialHash) {
			used = &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{s}}
			break
		}
	}
	if used == nil && pod.ServiceAccount != nil && slices.Contains(rp.accounts, *pod.ServiceAccount) {
		used = &accessor.ImagePullCredentials{KubernetesServiceAccounts: []accessor.ImagePullServiceAccount{*pod.ServiceAccount}}
	}
	if used == nil && rp.public {
		used = &accessor.ImagePullCredentials{NodePodsAccessible: true}
	}
	if used == nil {
		return "", nil, fmt.Errorf("%w: %s", ErrPullDenied, image)
	}
	content := tag
	if rp.sameAs != "" {
		content = rp.sameAs
	}
	id := r.addLocked(tag, content)
	if _, ok := r.pulledBy[id]; !ok && !used.NodePodsAccessible {
		r.pulledBy[id] = privatePull{pod: pod.Name, with: describeCredentials(used)}
	}
	return id, used, nil
}

// privatePuller returns who first pulled the content of id with private
// credentials, if anyone did.
func (r *fakeRuntime) privatePuller(id string) (privatePull, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pp, ok := r.pulledBy[id]
	return pp, ok
}

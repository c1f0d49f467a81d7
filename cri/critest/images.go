package critest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/distribution/reference"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The ImageService methods the fake serves, as Call.Method and for
// Intercept.
const (
	ListImages  = "ListImages"
	ImageStatus = "ImageStatus"
	PullImage   = "PullImage"
	RemoveImage = "RemoveImage"
	ImageFsInfo = "ImageFsInfo"
	// Version is the RuntimeService's Version call (see SetRuntimeVersion).
	Version = "Version"
	// ListContainers is the RuntimeService's ListContainers call (see
	// SetContainers).
	ListContainers = "ListContainers"
)

// ImageSize is every image's Size: the fake has no layers to measure.
const ImageSize = 1000

// Call is one request the fake received.
type Call struct {
	// Method is one of ListImages, ImageStatus, PullImage, RemoveImage,
	// ImageFsInfo, Version and ListContainers.
	Method string
	// Image is the image the request names, as the client sent it; empty
	// for ListImages (unless filtered), ImageFsInfo, Version and
	// ListContainers.
	Image string
	// Auth is PullImage's credentials, nil when it sent none and for the
	// other methods.
	Auth *runtimeapi.AuthConfig
}

// A Hook runs at the start of a call, before the fake looks at its images.
// A non-nil error is the call's answer: give it a gRPC status
// (google.golang.org/grpc/status) to choose the code the client sees; other
// errors reach it as codes.Unknown.
type Hook func(ctx context.Context, c Call) error

// Block is a Hook that waits for the call's context to end and answers with
// its error (codes.DeadlineExceeded or codes.Canceled): a runtime that hangs.
func Block(ctx context.Context, _ Call) error {
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

// Fail is a Hook that answers every call with err.
func Fail(err error) Hook {
	return func(context.Context, Call) error { return err }
}

type authRule struct {
	match              func(repository string) bool
	username, password string
}

// ImageService is the fake image service. Its methods are safe for
// concurrent use, also while it serves; the zero value is not usable: use
// NewImageService.
type ImageService struct {
	mu     sync.Mutex
	images map[string]*runtimeapi.Image // by ID
	auth   []authRule
	hooks  map[string][]Hook
	calls  []Call
	// digestRefs makes PullImage answer with a repository digest; see
	// AnswerPullsWithRepoDigest.
	digestRefs bool
	// imageFs is ImageFsInfo's answer; see SetImageFs.
	imageFs []FilesystemUsage
	// runtimeName and runtimeVersion are Version's answer.
	runtimeName, runtimeVersion string
	// containers is ListContainers' answer; see SetContainers.
	containers []*runtimeapi.Container
	// digests are manifest digests set by SetDigest, by canonical name.
	digests map[string]string
}

// NewImageService returns a fake image service with no images, that lets
// anyone pull anything.
func NewImageService() *ImageService {
	return &ImageService{images: map[string]*runtimeapi.Image{}, hooks: map[string][]Hook{},
		runtimeName: DefaultRuntimeName, runtimeVersion: DefaultRuntimeVersion}
}

// Register installs the fake on a gRPC server, for Listen and Start: the
// ImageService and a RuntimeService that answers Version only.
func (f *ImageService) Register(s *grpc.Server) {
	runtimeapi.RegisterImageServiceServer(s, &server{f: f})
	runtimeapi.RegisterRuntimeServiceServer(s, &runtimeServer{f: f})
}

// RegisterImageOnly installs the ImageService alone, as a runtime that
// serves images on a socket of their own: the RuntimeService (Version) is
// Unimplemented there.
func (f *ImageService) RegisterImageOnly(s *grpc.Server) {
	runtimeapi.RegisterImageServiceServer(s, &server{f: f})
}

// Serve serves the fake on a unix socket until t's test ends, and returns
// the socket's endpoint ("unix:///..."). For an explicit Stop or the bare
// path, use Start(t, f.Register).
func (f *ImageService) Serve(t testing.TB) string {
	t.Helper()
	return Start(t, f.Register).Endpoint()
}

// Canonical returns the reference image names as the fake stores and
// reports it: the fully qualified name with its tag ("latest" when it has
// none), or name@digest when it has a digest (whose tag, if any, a runtime
// ignores).
func Canonical(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", err
	}
	if d, ok := named.(reference.Digested); ok {
		return named.Name() + "@" + d.Digest().String(), nil
	}
	return reference.TagNameOnly(named).String(), nil
}

func fakeDigest(what, canonical string) string {
	sum := sha256.Sum256([]byte(what + canonical))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ImageID returns the ID the fake gives image when it is pulled or added:
// "sha256:" and the hex SHA-256 of "fake content of " and Canonical(image).
// The same reference always gets the same ID; a pull by digest that matches
// a present image's repository digest yields that image instead.
func ImageID(image string) (string, error) {
	c, err := Canonical(image)
	if err != nil {
		return "", err
	}
	return fakeDigest("fake content of ", c), nil
}

// Digest returns the manifest digest the fake gives a tagged image, which
// it reports in RepoDigests as name@digest: "sha256:" and the hex SHA-256
// of "fake manifest of " and Canonical(image). For a reference with a digest
// it is that digest.
func Digest(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", err
	}
	if d, ok := named.(reference.Digested); ok {
		return d.Digest().String(), nil
	}
	c, _ := Canonical(image)
	return fakeDigest("fake manifest of ", c), nil
}

// SetDigest makes a later pull or AddImage of the tagged image report
// digest as its manifest digest (in RepoDigests), as a runtime does that
// pulled a manifest of that digest: for tests whose registry serves real
// manifests. It does not change images already present.
func (f *ImageService) SetDigest(image, digest string) error {
	c, err := Canonical(image)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.digests == nil {
		f.digests = map[string]string{}
	}
	f.digests[c] = digest
	return nil
}

// AddImage makes image present, as a pull would without hooks or
// credentials, and returns its ID.
func (f *ImageService) AddImage(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.add(named), nil
}

// Image returns a copy of the image ref names (a reference in any form, an
// ID or a repository digest), or nil when it is absent.
func (f *ImageService) Image(ref string) *runtimeapi.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return clone(f.find(ref))
}

// Images returns copies of the images present, in ID order.
func (f *ImageService) Images() []*runtimeapi.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.list()
}

// RequireAuth makes a pull of any repository match accepts (given the
// canonical repository name, such as "docker.io/library/busybox") fail
// unless it carries username and password; see the package documentation
// for the error. The first rule that matches a repository decides.
func (f *ImageService) RequireAuth(match func(repository string) bool, username, password string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = append(f.auth, authRule{match: match, username: username, password: password})
}

// Repository returns a RequireAuth matcher for one repository, named in
// any form that canonicalises to it ("busybox" matches
// "docker.io/library/busybox").
func Repository(name string) func(repository string) bool {
	if named, err := reference.ParseNormalizedNamed(name); err == nil {
		name = named.Name()
	}
	return func(repository string) bool { return repository == name }
}

// AnswerPullsWithRepoDigest makes every later PullImage answer, as CRI-O
// does, with the pulled image's repository digest (name@digest: the
// reference itself for a pull by digest, name@Digest(tag) for a pull by tag)
// instead of its image ID. ImageStatus, ListImages and Image still report
// the ID. By default, and after AnswerPullsWithRepoDigest(false), a pull
// answers with the ID, as containerd does.
func (f *ImageService) AnswerPullsWithRepoDigest(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.digestRefs = on
}

// Intercept runs h at the start of every call to method, after the calls
// added before it; the first error a hook returns answers the call.
func (f *ImageService) Intercept(method string, h Hook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hooks[method] = append(f.hooks[method], h)
}

// Calls returns the calls received so far, oldest first.
func (f *ImageService) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// begin logs c and runs its hooks.
func (f *ImageService) begin(ctx context.Context, c Call) error {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	hooks := slices.Clone(f.hooks[c.Method])
	f.mu.Unlock()
	for _, h := range hooks {
		if err := h(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func clone(img *runtimeapi.Image) *runtimeapi.Image {
	if img == nil {
		return nil
	}
	return &runtimeapi.Image{
		Id:          img.Id,
		RepoTags:    slices.Clone(img.RepoTags),
		RepoDigests: slices.Clone(img.RepoDigests),
		Size:        img.Size,
	}
}

// add makes named present and returns its ID. f.mu is held.
func (f *ImageService) add(named reference.Named) string {
	c, _ := Canonical(named.String())
	if _, ok := named.(reference.Digested); ok {
		if img := f.byDigest(c); img != nil {
			return img.Id
		}
	}
	id := fakeDigest("fake content of ", c)
	img, ok := f.images[id]
	if !ok {
		img = &runtimeapi.Image{Id: id, Size: ImageSize}
		f.images[id] = img
	}
	if _, ok := named.(reference.Digested); ok {
		if !slices.Contains(img.RepoDigests, c) {
			img.RepoDigests = append(img.RepoDigests, c)
		}
		return id
	}
	if !slices.Contains(img.RepoTags, c) {
		img.RepoTags = append(img.RepoTags, c)
	}
	d, ok := f.digests[c]
	if !ok {
		d, _ = Digest(c)
	}
	if rd := named.Name() + "@" + d; !slices.Contains(img.RepoDigests, rd) {
		img.RepoDigests = append(img.RepoDigests, rd)
	}
	return id
}

func (f *ImageService) byDigest(c string) *runtimeapi.Image {
	for _, img := range f.images {
		if slices.Contains(img.RepoDigests, c) {
			return img
		}
	}
	return nil
}

// find resolves ref as an ID, a tag or a repository digest. f.mu is held.
func (f *ImageService) find(ref string) *runtimeapi.Image {
	if img, ok := f.images[ref]; ok {
		return img
	}
	c, err := Canonical(ref)
	if err != nil {
		return nil
	}
	for _, img := range f.images {
		if slices.Contains(img.RepoTags, c) || slices.Contains(img.RepoDigests, c) {
			return img
		}
	}
	return nil
}

// list returns copies of the images in ID order. f.mu is held.
func (f *ImageService) list() []*runtimeapi.Image {
	out := make([]*runtimeapi.Image, 0, len(f.images))
	for _, img := range f.images {
		out = append(out, clone(img))
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Image) int { return strings.Compare(a.Id, b.Id) })
	return out
}

// server is the gRPC face of an ImageService, kept apart so that the
// generated interface's methods do not crowd the fake's own API.
type server struct {
	runtimeapi.UnimplementedImageServiceServer
	f *ImageService
}

func (s *server) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	image := req.GetFilter().GetImage().GetImage()
	if err := s.f.begin(ctx, Call{Method: ListImages, Image: image}); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if image == "" {
		return &runtimeapi.ListImagesResponse{Images: s.f.list()}, nil
	}
	resp := &runtimeapi.ListImagesResponse{}
	if img := s.f.find(image); img != nil {
		resp.Images = append(resp.Images, clone(img))
	}
	return resp, nil
}

func (s *server) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	image := req.GetImage().GetImage()
	if err := s.f.begin(ctx, Call{Method: ImageStatus, Image: image}); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return &runtimeapi.ImageStatusResponse{Image: clone(s.f.find(image))}, nil
}

func (s *server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	image, auth := req.GetImage().GetImage(), req.GetAuth()
	if err := s.f.begin(ctx, Call{Method: PullImage, Image: image, Auth: auth}); err != nil {
		return nil, err
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.f.mu.Lock()
	rules := slices.Clone(s.f.auth)
	s.f.mu.Unlock()
	// The matchers are the test's code: call them without the lock.
	for _, r := range rules {
		if !r.match(named.Name()) {
			continue
		}
		if auth.GetUsername() != r.username || auth.GetPassword() != r.password {
			return nil, status.Errorf(codes.Unknown, "failed to pull and unpack image %q: unexpected status from registry: 401 Unauthorized", image)
		}
		break
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	ref := s.f.add(named)
	if s.f.digestRefs {
		ref, _ = Canonical(named.String())
		if _, ok := named.(reference.Digested); !ok {
			d, _ := Digest(ref)
			ref = named.Name() + "@" + d
		}
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

func (s *server) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	image := req.GetImage().GetImage()
	if err := s.f.begin(ctx, Call{Method: RemoveImage, Image: image}); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if img := s.f.find(image); img != nil {
		delete(s.f.images, img.Id)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (s *server) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	if err := s.f.begin(ctx, Call{Method: ImageFsInfo}); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	resp := &runtimeapi.ImageFsInfoResponse{}
	for _, u := range s.f.imageFs {
		resp.ImageFilesystems = append(resp.ImageFilesystems, &runtimeapi.FilesystemUsage{
			Timestamp:  1,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: u.Mountpoint},
			UsedBytes:  &runtimeapi.UInt64Value{Value: u.UsedBytes},
			InodesUsed: &runtimeapi.UInt64Value{Value: u.InodesUsed},
		})
	}
	return resp, nil
}

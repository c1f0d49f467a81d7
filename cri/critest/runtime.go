package critest

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The fake's Version answer until SetRuntimeVersion.
const (
	DefaultRuntimeName    = "critest"
	DefaultRuntimeVersion = "0.0.0"
)

// FilesystemUsage is one image filesystem ImageFsInfo reports.
type FilesystemUsage struct {
	Mountpoint string
	UsedBytes  uint64
	InodesUsed uint64
}

// SetImageFs sets ImageFsInfo's image filesystems (none by default, and
// after SetImageFs()).
func (f *ImageService) SetImageFs(fs ...FilesystemUsage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imageFs = slices.Clone(fs)
}

// SetRuntimeVersion sets the RuntimeService Version answer's runtime_name
// and runtime_version (DefaultRuntimeName and DefaultRuntimeVersion by
// default).
func (f *ImageService) SetRuntimeVersion(name, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runtimeName, f.runtimeVersion = name, version
}

// SetContainers sets ListContainers' answer (none by default, and after
// SetContainers()). The fake keeps its own copies.
func (f *ImageService) SetContainers(containers ...*runtimeapi.Container) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers = make([]*runtimeapi.Container, len(containers))
	for i, c := range containers {
		f.containers[i] = proto.CloneOf(c)
	}
}

// runtimeServer is the RuntimeService face of an ImageService: Version and
// ListContainers, every other call is Unimplemented.
type runtimeServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	f *ImageService
}

func (s *runtimeServer) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if err := s.f.begin(ctx, Call{Method: Version}); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       s.f.runtimeName,
		RuntimeVersion:    s.f.runtimeVersion,
		RuntimeApiVersion: "v1",
	}, nil
}

// ListContainers answers with the containers SetContainers gave, in that
// order; the request's filter is ignored.
func (s *runtimeServer) ListContainers(ctx context.Context, _ *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	if err := s.f.begin(ctx, Call{Method: ListContainers}); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	// SetContainers replaces the slice and never changes a container, so
	// the answer may share them after the lock is dropped.
	return &runtimeapi.ListContainersResponse{Containers: slices.Clone(s.f.containers)}, nil
}

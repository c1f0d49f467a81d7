package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// FilesystemUsage is the runtime's report of one image filesystem (CRI
// ImageFsInfo's image_filesystems). Fields the runtime leaves unset are
// zero.
type FilesystemUsage struct {
	// Mountpoint is the filesystem's mount point, as the runtime names it
	// (on the runtime's side, which is the node's for a node agent).
	Mountpoint string
	// UsedBytes is the space images use on it.
	UsedBytes uint64
	// InodesUsed is the inodes images use on it.
	InodesUsed uint64
}

// ImageFsInfo returns the runtime's image filesystems (not its container
// filesystems), in the runtime's order; an empty slice when it reports none.
func (s *ImageService) ImageFsInfo(ctx context.Context) ([]FilesystemUsage, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	ctx, cancel := withTimeout(ctx, s.opts.callTimeout)
	defer cancel()
	resp, err := s.client.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, newCallError("ImageFsInfo", "", err)
	}
	out := make([]FilesystemUsage, 0, len(resp.GetImageFilesystems()))
	for _, fs := range resp.GetImageFilesystems() {
		out = append(out, FilesystemUsage{
			Mountpoint: fs.GetFsId().GetMountpoint(),
			UsedBytes:  fs.GetUsedBytes().GetValue(),
			InodesUsed: fs.GetInodesUsed().GetValue(),
		})
	}
	return out, nil
}

// RuntimeVersion returns "<runtime_name>://<runtime_version>" from the
// RuntimeService Version call on the same connection, as the kubelet
// reports a node's containerRuntimeVersion (for example
// "containerd://2.1.0").
func (s *ImageService) RuntimeVersion(ctx context.Context) (string, error) {
	if s.closed.Load() {
		return "", ErrClosed
	}
	ctx, cancel := withTimeout(ctx, s.opts.callTimeout)
	defer cancel()
	resp, err := s.runtime.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return "", newCallError("Version", "", err)
	}
	return resp.GetRuntimeName() + "://" + resp.GetRuntimeVersion(), nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cri"
	"github.com/pullrecords/pullrecords/cri/containerdapi"
	"github.com/pullrecords/pullrecords/cri/criproxy"
	"github.com/pullrecords/pullrecords/cri/nodegate"
	"github.com/pullrecords/pullrecords/crishim"
	"github.com/pullrecords/pullrecords/originverify"
)

const shimLong = `shim is a CRI v1 proxy for a container runtime's socket. The kubelet talks to
the shim (its containerRuntimeEndpoint); the shim forwards every call to the
runtime unchanged, as raw frames, except PullImage: a pull goes on only after the
image's own registry, never a mirror, accepted the request's credential for that
reference, or the node's credentials (--node-credentials) for a request without
one, or no credential for a public image, and proved that it holds the image's
content: the manifest is fetched and hashed, and every blob the node already
holds (the blobs the runtime would not fetch again) is challenged with byte
ranges at random offsets compared with the node's own copy (read from
containerd's content store on the runtime's socket). After the pull, the image
the runtime holds must be the one proved; otherwise the pull is refused and the
names it created are removed.

Why: behind a registry mirror or a peer-to-peer cache (Spegel, k3s's embedded
mirror, pull-through caches) the runtime's pull is answered without the pod's
credential, so the kubelet's "must pull" check (KEP-2535) proves nothing there.

A verification is remembered per (credential, repository, digest) for
--verify-ttl in --state-dir, across restarts; concurrent identical pulls make
one origin request. An origin that cannot be reached refuses the pull (fail
closed) unless its registry is --mirror-only, which skips verification for that
registry and trusts whatever the runtime's mirrors serve from it.

--state-dir holds the shim's own records (DIR/image_manager, in the kubelet's
format: "pullrecords --kubelet-dir DIR ls" and "fsck" read them) and its
verifications (DIR/verified); it must not be the kubelet's directory.`

type shimOptions struct {
	listen          string
	runtimeEndpoint string
	stateDir        string
	verifyTTL       time.Duration
	nodeCredentials string
	mirrorOnly      []string
	insecure        []string
	metricsAddr     string
	namespace       string
	maxBlobBytes    int64
}

func newShimCmd(g *globalOptions) *cobra.Command {
	var o shimOptions
	cmd := &cobra.Command{
		Use:   "shim",
		Short: "Run a CRI proxy that verifies each pull's credential at the image's origin registry",
		Long:  shimLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// SIGINT and SIGTERM stop the shim, as does the end of the
			// command's context (tests run it in-process).
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return runShim(klog.NewContext(ctx, g.logger()), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "unix:///run/pullrecords/shim.sock", "the socket the shim serves CRI on (unix://PATH); the kubelet's containerRuntimeEndpoint")
	f.StringVar(&o.runtimeEndpoint, "runtime-endpoint", "unix:///run/containerd/containerd.sock", "the real runtime's CRI socket (unix://PATH)")
	f.StringVar(&o.stateDir, "state-dir", "/var/lib/pullrecords-shim", "the shim's own records and verifications (never the kubelet's directory)")
	f.DurationVar(&o.verifyTTL, "verify-ttl", time.Hour, "how long a verification at the origin vouches for a (credential, repository, digest)")
	f.StringVar(&o.nodeCredentials, "node-credentials", "", "a Docker config JSON with the node's own registry credentials, used for pulls that carry none (node-wide, as in the kubelet)")
	f.StringSliceVar(&o.mirrorOnly, "mirror-only", nil, "a registry host whose origin is unreachable by design (air-gapped): its pulls are not verified (repeatable)")
	f.StringSliceVar(&o.insecure, "insecure-registry", nil, "a registry host the shim reaches over plain HTTP (repeatable)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "127.0.0.1:9847", "address of /metrics and /healthz (host:port; empty: none)")
	f.StringVar(&o.namespace, "containerd-namespace", containerdapi.DefaultNamespace, "the containerd namespace the CRI keeps its images in: the proofs read the node's bytes there")
	f.Int64Var(&o.maxBlobBytes, "max-proof-blob-bytes", originverify.DefaultMaxBlobBytes, "the largest blob a proof fetches whole (from a registry that ignores range requests, or a runtime without a readable content store); larger ones are refused")
	return cmd
}

// unixPath returns the path of a unix:// endpoint, naming flag in its error.
func unixPath(flag, endpoint string) (string, error) {
	p, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || p == "" || !filepath.IsAbs(p) {
		return "", usageErrorf("--%s %q: want unix:///absolute/path", flag, endpoint)
	}
	return p, nil
}

// validate checks o and returns the two socket paths.
func (o shimOptions) validate(kubeletDir string) (listen, runtime string, err error) {
	if listen, err = unixPath("listen", o.listen); err != nil {
		return "", "", err
	}
	if runtime, err = unixPath("runtime-endpoint", o.runtimeEndpoint); err != nil {
		return "", "", err
	}
	if filepath.Clean(listen) == filepath.Clean(runtime) {
		return "", "", usageErrorf("--listen and --runtime-endpoint are the same socket %s", listen)
	}
	if o.verifyTTL <= 0 {
		return "", "", usageErrorf("--verify-ttl %s: must be positive", o.verifyTTL)
	}
	if o.maxBlobBytes <= 0 {
		return "", "", usageErrorf("--max-proof-blob-bytes %d: must be positive", o.maxBlobBytes)
	}
	if o.namespace == "" {
		return "", "", usageErrorf("--containerd-namespace is required")
	}
	if o.stateDir == "" {
		return "", "", usageErrorf("--state-dir is required")
	}
	state, err := filepath.Abs(o.stateDir)
	if err != nil {
		return "", "", usageErrorf("--state-dir %q: %v", o.stateDir, err)
	}
	if kubeletDir != "" {
		kd, err := filepath.Abs(kubeletDir)
		if err == nil && (state == kd || strings.HasPrefix(state+string(filepath.Separator), kd+string(filepath.Separator))) {
			return "", "", usageErrorf("--state-dir %s is inside the kubelet's directory %s: the shim keeps its own records, never the kubelet's", state, kd)
		}
	}
	for _, h := range append(append([]string(nil), o.mirrorOnly...), o.insecure...) {
		if h == "" || strings.ContainsAny(h, "/ ") {
			return "", "", usageErrorf("registry host %q: want host or host:port", h)
		}
	}
	return listen, runtime, nil
}

func runShim(ctx context.Context, g *globalOptions, o shimOptions) error {
	logger := klog.FromContext(ctx)
	listenPath, _, err := o.validate(g.kubeletDir)
	if err != nil {
		return err
	}
	var node *crishim.NodeCredentials
	if o.nodeCredentials != "" {
		if node, err = crishim.LoadNodeCredentials(o.nodeCredentials); err != nil {
			return fmt.Errorf("%w: --node-credentials: %v", errUsage, err)
		}
	}
	if err := os.MkdirAll(o.stateDir, 0o700); err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}

	// Dialled as every CRI client here is: quick reconnects after a
	// runtime restart, the kubelet's message bound.
	conn, err := cri.NewConn(o.runtimeEndpoint)
	if err != nil {
		return fmt.Errorf("--runtime-endpoint %s: %w", o.runtimeEndpoint, err)
	}
	defer conn.Close()

	gateMetrics := crishim.NewMetrics()
	proxyMetrics := criproxy.NewMetrics()
	gate, err := nodegate.Open(ctx, conn, nodegate.Options{
		StateDir:     o.stateDir,
		Namespace:    o.namespace,
		TTL:          o.verifyTTL,
		Insecure:     o.insecure,
		MaxBlobBytes: o.maxBlobBytes,
		Node:         node,
		MirrorOnly:   o.mirrorOnly,
		Metrics:      gateMetrics,
	})
	if err != nil {
		return err
	}
	defer gate.Close()
	proxy := criproxy.New(conn, criGate{gate: gate.Gate}, criproxy.WithMetrics(proxyMetrics), criproxy.WithLogger(logger))

	lis, err := listenUnix(listenPath)
	if err != nil {
		return err
	}
	var ms *metricsServer
	if o.metricsAddr != "" {
		reg := prometheus.NewRegistry()
		if err := gateMetrics.Register(reg); err != nil {
			return err
		}
		if err := proxyMetrics.Register(reg); err != nil {
			return err
		}
		if ms, err = startMetricsRegistry(o.metricsAddr, reg); err != nil {
			return err
		}
		defer ms.stop()
	}

	served := make(chan error, 1)
	go func() { served <- proxy.Serve(lis) }()
	if ms != nil {
		ms.healthy.Store(true)
	}
	logger.Info("CRI shim serving", "listen", o.listen, "runtime", o.runtimeEndpoint, "stateDir", o.stateDir,
		"verifyTTL", o.verifyTTL, "mirrorOnly", o.mirrorOnly, "insecureRegistries", o.insecure)
	select {
	case <-ctx.Done():
		logger.Info("Stopping the CRI shim")
		proxy.Stop()
		<-served
		return nil
	case err := <-served:
		if err != nil {
			return fmt.Errorf("serving %s: %w", o.listen, err)
		}
		return nil
	}
}

// listenUnix listens on path, first removing a socket a previous run left
// there (a killed shim cannot remove its own); anything else at path is an
// error, never removed.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%w: --listen %s exists and is not a socket", errUsage, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("--listen: removing the stale socket: %w", err)
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("--listen: %w", err)
	}
	return lis, nil
}

// criGate presents a crishim.Gate to the proxy and turns its refusals into
// the gRPC errors the kubelet reports as ErrImagePull; the runtime's own
// errors pass as they are.
type criGate struct{ gate *crishim.Gate }

func (c criGate) GatePull(ctx context.Context, req *runtimeapi.PullImageRequest, pull func(context.Context) (*runtimeapi.PullImageResponse, error)) error {
	var runtimeErr error
	_, err := c.gate.Pull(ctx, crishim.RequestFromCRI(req), func(ctx context.Context) (string, error) {
		resp, err := pull(ctx)
		if err != nil {
			runtimeErr = err
			return "", err
		}
		return resp.GetImageRef(), nil
	})
	switch {
	case err == nil:
		return nil
	case runtimeErr != nil && err == runtimeErr:
		return err
	default:
		return status.Error(refusalCode(err), "pullrecords shim: "+err.Error())
	}
}

// refusalCode is the gRPC code of a refusal.
func refusalCode(err error) codes.Code {
	switch {
	case errors.Is(err, originverify.ErrNotProven), errors.Is(err, crishim.ErrUnverifiedContent), errors.Is(err, crishim.ErrPrivateContent):
		return codes.PermissionDenied
	case errors.Is(err, originverify.ErrDenied):
		return codes.PermissionDenied
	case errors.Is(err, originverify.ErrNotFound):
		return codes.NotFound
	case errors.Is(err, originverify.ErrUnreachable):
		return codes.Unavailable
	case errors.Is(err, originverify.ErrInvalidReference):
		return codes.InvalidArgument
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	default:
		return codes.Unknown
	}
}

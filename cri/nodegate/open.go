package nodegate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/credstamp"
	"github.com/pullrecords/pullrecords/cri/containerdapi"
	"github.com/pullrecords/pullrecords/cri/criproxy"
	"github.com/pullrecords/pullrecords/crishim"
	"github.com/pullrecords/pullrecords/originverify"
	"github.com/pullrecords/pullrecords/pullmanager"
	"github.com/pullrecords/pullrecords/recordsdir"
)

// Options are the gate's settings.
type Options struct {
	// StateDir holds the gate's pull records and verifications. Required.
	StateDir string
	// Namespace is the containerd namespace the CRI keeps its images in
	// (containerdapi.DefaultNamespace when empty).
	Namespace string
	// TTL is how long a proof vouches for a (credential, repository,
	// digest). Required, positive.
	TTL time.Duration
	// Insecure are registry hosts reached over plain HTTP.
	Insecure []string
	// MaxBlobBytes caps a blob fetched whole (originverify.WithMaxBlobBytes;
	// originverify.DefaultMaxBlobBytes when zero).
	MaxBlobBytes int64
	// Node are the node's own credentials for pulls that carry none.
	Node *crishim.NodeCredentials
	// MirrorOnly are registry hosts admitted without a proof (crishim).
	MirrorOnly []string
	// Metrics may be nil.
	Metrics *crishim.Metrics
	// Options are given to originverify.New before the ones Open adds
	// (tests: a transport).
	Verifier []originverify.Option
}

// Gate is an open gate and what it holds open.
type Gate struct {
	*crishim.Gate
	// ContentStore says whether proofs read the node's bytes from
	// containerd's content store (false: they fetch blobs whole).
	ContentStore bool
	closers      []func() error
	stopPruning  func()
}

// Open opens the gate over conn, a connection to the runtime's CRI socket
// (cri.NewConn). The caller closes conn after the gate.
func Open(ctx context.Context, conn *grpc.ClientConn, o Options) (_ *Gate, err error) {
	logger := klog.FromContext(ctx)
	switch {
	case o.StateDir == "":
		return nil, fmt.Errorf("%w: no state directory", errInvalidOptions)
	case o.TTL <= 0:
		return nil, fmt.Errorf("%w: the verification TTL %s is not positive", errInvalidOptions, o.TTL)
	case o.MaxBlobBytes < 0:
		return nil, fmt.Errorf("%w: the blob cap %d is negative", errInvalidOptions, o.MaxBlobBytes)
	}
	if o.Namespace == "" {
		o.Namespace = containerdapi.DefaultNamespace
	}
	g := &Gate{stopPruning: func() {}}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()

	// The gate's records say which credential verified which image, in the
	// kubelet's format; every credential must prove itself (AlwaysVerify).
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.AlwaysVerify, nil)
	if err != nil {
		return nil, err
	}
	records, err := recordsdir.Open(ctx, o.StateDir, policy, nil)
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, records.Close)
	stamps, err := credstamp.Open(logger, filepath.Join(o.StateDir, "verified"))
	if err != nil {
		return nil, fmt.Errorf("opening the verifications: %w", err)
	}
	g.closers = append(g.closers, stamps.Close)
	pruneCtx, stop := context.WithCancel(ctx)
	pruned := make(chan struct{})
	go func() { defer close(pruned); pruneVerifications(pruneCtx, stamps, o.TTL) }()
	g.stopPruning = func() { stop(); <-pruned }

	// The proofs challenge registries on the node's own bytes, read from
	// containerd's content store on the runtime's socket.
	content, names, err := Stores(ctx, conn, o.Namespace)
	if err != nil {
		return nil, err
	}
	g.ContentStore = content != nil
	if content == nil {
		logger.Info("The runtime does not serve containerd's content store: proofs fetch whole blobs, and a refused pull's names stay")
	}
	verifierOpts := append(append([]originverify.Option(nil), o.Verifier...),
		originverify.WithInsecureRegistries(o.Insecure...),
		originverify.WithContent(content),
		originverify.WithMaxBlobBytes(o.MaxBlobBytes))
	gate, err := crishim.NewGate(crishim.Config{
		Records:    records.Manager(),
		Store:      records.Accessor(),
		Stamps:     stamps,
		Verifier:   originverify.New(verifierOpts...),
		TTL:        o.TTL,
		Node:       o.Node,
		MirrorOnly: o.MirrorOnly,
		Local:      criproxy.RuntimeDigest(conn),
		Runtime:    New(FromClient(runtimeapi.NewImageServiceClient(conn)), names),
		Metrics:    o.Metrics,
		Classify: crishim.ClassifyBySentinels(originverify.ErrDenied, originverify.ErrNotFound,
			originverify.ErrUnreachable, originverify.ErrInvalidReference, originverify.ErrNotProven),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidOptions, err)
	}
	g.Gate = gate
	return g, nil
}

// Close stops pruning, then closes the stores (last opened first).
func (g *Gate) Close() error {
	g.stopPruning()
	var errs []error
	for i := len(g.closers) - 1; i >= 0; i-- {
		errs = append(errs, g.closers[i]())
	}
	g.closers = nil
	return errors.Join(errs...)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/imagecache"
)

// defaultCRIEndpoint is crictl's first default, containerd's socket.
const (
	envCRIEndpoint     = "CONTAINER_RUNTIME_ENDPOINT"
	defaultCRIEndpoint = "unix:///run/containerd/containerd.sock"
)

// declaredPollInterval is how often "cache run" looks at the declared file.
// Polling (one lstat a second) rather than inotify: it needs no watch
// descriptors (inotify's per-user limit is shared with every other watcher
// on the node), sees a file replaced by rename, a directory removed and
// recreated, and a state directory on any file system (inotify misses
// changes made through another mount of an overlay or network file system)
// the same way, and a second of delay is nothing next to a pull. A stamp of
// inode, size and modification time changes on every atomic replacement, and
// a spurious reload is harmless: Sync changes nothing for an unchanged set.
var declaredPollInterval = time.Second

type cacheRunOptions struct {
	endpoint    string
	once        bool
	workers     int
	timeout     time.Duration
	metricsAddr string
}

// criEndpoint is --cri, else $CONTAINER_RUNTIME_ENDPOINT, else containerd's
// socket, as crictl chooses.
func (r *cacheRunOptions) criEndpoint() string {
	if r.endpoint != "" {
		return r.endpoint
	}
	if v := os.Getenv(envCRIEndpoint); v != "" {
		return v
	}
	return defaultCRIEndpoint
}

func newCacheRunCmd(g *globalOptions, o *cacheOptions) *cobra.Command {
	r := &cacheRunOptions{}
	cmd := &cobra.Command{
		Use:   "run [--cri ENDPOINT]",
		Short: "Pull, refresh and purge the declared images through the CRI (anonymously; writes no records)",
		Long: `Work the image caches: apply what is declared, resume unfinished work, pull what is
missing, refresh caches that have a refresh interval, and purge images dropped
from caches. Runs until interrupted, and picks up "cache apply" and "cache
delete" within a second, without a restart. With --once it applies what is
declared, refreshes every cache once, waits for the work and exits (status 1
if any work failed). One cache run works a state directory at a time.

It runs beside the kubelet as a standalone image cache: pulls are anonymous, an
image the runtime has counts as pulled, and nothing is written under
<kubelet dir>/image_manager (a running stock kubelet would not see it). It does
not start while a declared cache has a pullSecret (see "cache apply --help"), so
it takes no registry credentials.

Output: one line per result and per completed batch. On a terminal a progress
line stays at the bottom and the results scroll above it, so failures stay on
screen. -o json prints one JSON object per line instead; -o yaml is refused.

--metrics-addr serves /metrics (the image cache's Prometheus metrics) and
/healthz (200 while the work loop runs) over plain HTTP: bind it to 127.0.0.1
or a node-internal address.`,
		Example: `  pullrecords cache run                                   # $CONTAINER_RUNTIME_ENDPOINT or containerd's socket
  pullrecords cache run --cri unix:///run/crio/crio.sock --metrics-addr 127.0.0.1:9846
  pullrecords cache run --once                            # cron-style: one pass, exit 1 on failures`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCache(cmd.Context(), g, o, r)
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.endpoint, "cri", "", "CRI endpoint: unix:///path/to.sock or /path/to.sock (default $"+envCRIEndpoint+", else "+defaultCRIEndpoint+")")
	f.BoolVar(&r.once, "once", false, "apply what is declared, refresh every cache once, wait for the work, and exit")
	f.IntVar(&r.workers, "workers", imagecache.DefaultWorkers, "parallel pulls")
	f.DurationVar(&r.timeout, "timeout", 10*time.Second, "timeout of each CRI call other than pulls")
	f.StringVar(&r.metricsAddr, "metrics-addr", "", "serve /metrics and /healthz on this host:port (for example 127.0.0.1:9846; off when empty)")
	return cmd
}

// privateHint ends cache run's refusal of a declared private cache.
const privateHint = `remove it with "pullrecords cache delete NAMES"`

func runCache(parent context.Context, g *globalOptions, o *cacheOptions, r *cacheRunOptions) error {
	format, err := parseFormat(g.output)
	if err != nil {
		return err
	}
	if format == formatYAML {
		return usageErrorf("cache run: -o yaml is not supported: the output is a stream; -o json prints one JSON object per line")
	}
	if r.workers < 1 {
		return usageErrorf("--workers %d: want at least 1", r.workers)
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger := g.logger()
	ctx = klog.NewContext(ctx, logger)

	if err := checkKubeletDir(g.kubeletDir); err != nil {
		return err
	}
	paths := o.paths(g)
	endpoint := r.criEndpoint()

	// Refuse before taking anything: a declared cache with a pull secret
	// (cache apply refuses one, so it was written by hand) must not be
	// pulled from here.
	stamp := stampOf(paths.declared())
	specs, _, err := paths.loadDeclared()
	if err != nil {
		return err
	}
	caches := toImageCaches(specs)
	if err := refusePrivate("cache run", caches, privateHint); err != nil {
		return err
	}
	lock, err := lockFile(paths.base, runLock, false)
	if errors.Is(err, errLockHeld) {
		who := "another cache run"
		if pid := runningCacheRun(paths.base); pid > 0 {
			who = fmt.Sprintf("another cache run (PID %d)", pid)
		}
		return fmt.Errorf("cache run: %s is working %s; one at a time", who, esc(paths.base))
	}
	if err != nil {
		return err
	}
	defer lock.unlock()

	svc, err := dialCRI(ctx, endpoint, r.timeout)
	if err != nil {
		return err
	}
	defer svc.Close()

	printer := newRunPrinter(g.stdout, format == formatJSON)
	var mu sync.Mutex
	waiting := map[string]uint64{} // cache -> batch --once waits for
	host, _ := os.Hostname()
	m, err := imagecache.NewStandalone(logger, svc,
		imagecache.WithStateDir(paths.state),
		imagecache.WithWorkers(r.workers),
		imagecache.WithNode(host, ""),
		imagecache.WithResultHandler(printer.result),
		imagecache.WithStatusHandler(func(s imagecache.CacheStatus) {
			printer.status(s)
			// The manager has kept s in its state directory (the last status
			// "cache status" shows) before handing it here.
			mu.Lock()
			defer mu.Unlock()
			if b, ok := waiting[s.ImageCache.String()]; ok && r.once && s.Complete && s.Batch >= b {
				delete(waiting, s.ImageCache.String())
				if len(waiting) == 0 {
					cancel()
				}
			}
		}),
	)
	if err != nil {
		return describeFSError(err)
	}
	printer.pending = m.Pending

	res, err := m.Sync(ctx, caches)
	if err != nil {
		return fmt.Errorf("cache run: applying the declared caches: %w", err)
	}
	if res.Changed() {
		printer.note("%s", describeSync("applied the declared caches", res))
	}

	if r.once {
		// Nothing runs before Run starts, so no batch can complete
		// between these calls and the handler's check.
		refs := map[string]imagecache.CacheRef{}
		for _, c := range m.Caches() {
			refs[c.Ref().String()] = c.Ref()
			st, ok := m.Status(c.Namespace, c.Name)
			if !ok || st.Complete {
				if err := m.Refresh(ctx, c.Namespace, c.Name); err != nil {
					return fmt.Errorf("cache %s: %w", c.Ref(), err)
				}
			}
		}
		for _, ref := range res.Deleted {
			refs[ref.String()] = ref
		}
		mu.Lock()
		for name, ref := range refs {
			if st, ok := m.Status(ref.Namespace, ref.Name); ok && !st.Complete {
				waiting[name] = st.Batch
			}
		}
		nothing := len(waiting) == 0
		mu.Unlock()
		if nothing && len(m.Caches()) == 0 {
			printer.note("no image caches declared (use \"pullrecords cache apply -f FILE\")")
			return nil
		}
		if nothing {
			return nil
		}
		printer.setIdle("finishing")
	} else {
		printer.setIdle("watching " + paths.declared() + ";")
		go watchDeclared(ctx, paths, m, printer, stamp)
	}

	var metrics *metricsServer
	if r.metricsAddr != "" {
		if metrics, err = startMetrics(r.metricsAddr, m.Collectors()); err != nil {
			return err
		}
		defer metrics.stop()
		fmt.Fprintf(g.stderr, "cache run: serving http://%s/metrics and http://%s/healthz\n", metrics.addr, metrics.addr)
		metrics.healthy.Store(true)
	}

	runErr := m.Run(ctx)
	if metrics != nil {
		metrics.healthy.Store(false)
	}
	printer.close()
	failed := printer.failures()
	if format == formatTable && printer.terminal {
		fmt.Fprintf(g.stdout, "cache run stopped: %s failed\n", plural(failed, "request"))
	}
	if runErr != nil {
		return runErr
	}
	if r.once && failed > 0 {
		return fmt.Errorf("%w: %s failed", errProblemsFound, plural(failed, "request"))
	}
	return nil
}

// describeSync says what a Sync changed, in one line.
func describeSync(what string, res imagecache.SyncResult) string {
	names := func(refs []imagecache.CacheRef) string {
		s := make([]string, 0, len(refs))
		for _, r := range refs {
			s = append(s, r.String())
		}
		return strings.Join(s, ", ")
	}
	var parts []string
	if len(res.Applied) > 0 {
		parts = append(parts, "applied "+names(res.Applied))
	}
	if len(res.Deleted) > 0 {
		parts = append(parts, "deleted "+names(res.Deleted))
	}
	return what + ": " + strings.Join(parts, "; ")
}

// watchDeclared applies the declared caches whenever the declared file
// changes, until ctx ends. A file that does not validate, or declares a
// private cache, is reported and ignored: the caches applied stay as they
// are until a good version comes.
func watchDeclared(ctx context.Context, paths cachePaths, m *imagecache.Manager, printer *runPrinter, stamp fileStamp) {
	t := time.NewTicker(declaredPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := stampOf(paths.declared())
		if now == stamp {
			printer.refresh()
			continue
		}
		stamp = now
		specs, _, err := paths.loadDeclared()
		if err != nil {
			printer.note("cache run: ignoring the changed %s: %v", paths.declared(), err)
			continue
		}
		caches := toImageCaches(specs)
		if err := refusePrivate("cache run: ignoring the changed "+paths.declared(), caches, privateHint); err != nil {
			printer.note("%v", err)
			continue
		}
		res, err := m.Sync(ctx, caches)
		if err != nil {
			if errors.Is(err, imagecache.ErrShutDown) {
				return
			}
			printer.note("cache run: applying the changed %s: %v", paths.declared(), err)
			continue
		}
		if res.Changed() {
			printer.note("%s", describeSync("picked up "+paths.declared(), res))
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/imagecache"
	"github.com/pullrecords/pullrecords/internal/atomicfile"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// cacheSpec is one image cache in a cache file (YAML or JSON).
type cacheSpec struct {
	Namespace       string      `json:"namespace"`
	Name            string      `json:"name"`
	Images          []string    `json:"images"`
	ForceFullCache  bool        `json:"forceFullCache,omitempty"`
	RefreshInterval string      `json:"refreshInterval,omitempty"`
	PullSecret      *secretSpec `json:"pullSecret,omitempty"`
}

// secretSpec is a registry credential and the Kubernetes secret it comes from.
type secretSpec struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Username  string `json:"username"`
	Password  string `json:"password"`
	Email     string `json:"email,omitempty"`
}

type cacheOptions struct {
	stateDir string
}

// stateDirs returns the image cache manager's state directory and the file
// where "cache run" leaves the latest status of each cache.
func (o *cacheOptions) stateDirs(g *globalOptions) (state, statusFile string) {
	base := o.stateDir
	if base == "" {
		base = filepath.Join(g.kubeletDir, "pullrecords")
	}
	return filepath.Join(base, "imagecache"), filepath.Join(base, "cache-status.json")
}

func newCacheCmd(g *globalOptions) *cobra.Command {
	o := &cacheOptions{}
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Drive the node-local image cache manager",
		Long: `Keep declared sets of public images (image caches) present on this node through the
CRI, beside the kubelet.

This command is another process beside the kubelet, so it writes nothing in the
kubelet's pull records (no intents, no records) and pulls only anonymously. A
running stock kubelet never sees records another process writes: an image pulled
here with a tenant's secret would look preloaded to it, usable by every pod. So a
cache with a pullSecret is refused. To pre-pull private images, either let the
kubelet pull them (a pod bound to the node carrying the imagePullSecrets: the
cluster pre-pull), or run the image cache in-process in a kubelet built on the
pullrecords library (it holds the records' lock and records each secret).

  cache apply -f FILE         declare caches (YAML or JSON list); writes the state dir
  cache status                show the declared caches and the last run's results
  cache run --cri ENDPOINT    do the work: pull, refresh, purge through the CRI

The state lives in <kubelet dir>/pullrecords (change with --state-dir), never in
<kubelet dir>/image_manager.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.PersistentFlags().StringVar(&o.stateDir, "state-dir", "", "directory for the cache manager's state (default <kubelet dir>/pullrecords)")
	cmd.AddCommand(newCacheApplyCmd(g, o), newCacheStatusCmd(g, o), newCacheRunCmd(g, o))
	return cmd
}

// maxCacheFileSize bounds a cache file: it is read whole and parsed, and a
// node's caches fit in far less.
const maxCacheFileSize = 4 << 20

// readLimited reads path, refusing a file larger than limit bytes before
// parsing anything: by its size when it is a regular file, else by reading
// at most limit+1 bytes.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := func(size string) error {
		return fmt.Errorf("%s is larger than %d MiB (%s); refusing to read it", path, limit>>20, size)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, tooLarge(plural(int(fi.Size()), "byte"))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, tooLarge("more than " + plural(int(limit), "byte"))
	}
	return data, nil
}

// readCacheFile parses a YAML or JSON list of caches, strictly.
func readCacheFile(path string) ([]imagecache.ImageCache, error) {
	data, err := readLimited(path, maxCacheFileSize)
	if err != nil {
		return nil, err
	}
	var specs []cacheSpec
	if err := yaml.UnmarshalStrict(data, &specs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("%s: no image caches", path)
	}
	out := make([]imagecache.ImageCache, 0, len(specs))
	for i, s := range specs {
		c := imagecache.ImageCache{Namespace: s.Namespace, Name: s.Name, Images: s.Images, ForceFullCache: s.ForceFullCache}
		if s.RefreshInterval != "" {
			d, err := time.ParseDuration(s.RefreshInterval)
			if err != nil || d < 0 {
				return nil, fmt.Errorf("%s: cache %d (%s/%s): refreshInterval %q: want a duration such as 1h", path, i, s.Namespace, s.Name, s.RefreshInterval)
			}
			c.RefreshInterval = d
		}
		if p := s.PullSecret; p != nil {
			c.PullSecret = &imagecache.PullSecret{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
				Username: p.Username, Password: p.Password, Email: p.Email}
		}
		out = append(out, c)
	}
	return out, nil
}

// noImages is the image service of a manager that is never run.
type noImages struct{}

var errNoRuntime = errors.New("no container runtime in this command")

func (noImages) ImageStatus(context.Context, string) (*pullmanager.Image, error) {
	return nil, errNoRuntime
}
func (noImages) PullImage(context.Context, string, *pullmanager.AuthConfig) (string, error) {
	return "", errNoRuntime
}
func (noImages) RemoveImage(context.Context, string) error { return errNoRuntime }

// offlineManager opens the cache manager's state without a runtime, as a
// standalone manager (it refuses caches with a pull secret).
func (o *cacheOptions) offlineManager(g *globalOptions) (*imagecache.Manager, error) {
	if err := checkKubeletDir(g.kubeletDir); err != nil {
		return nil, err
	}
	state, _ := o.stateDirs(g)
	m, err := imagecache.NewStandalone(g.logger(), noImages{}, imagecache.WithStateDir(state))
	if err != nil {
		return nil, describeFSError(err)
	}
	return m, nil
}

func newCacheApplyCmd(g *globalOptions, o *cacheOptions) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Declare image caches from a YAML or JSON file (writes the state dir)",
		Long: `Declare image caches from a YAML or JSON list (at most 4 MiB). Each cache has a
namespace, a name, images, and optionally forceFullCache and refreshInterval (for
example 1h). The work is done by "cache run".

A cache with a pullSecret is refused, and nothing in the file is applied: this
command pulls beside the kubelet, where a private image would look preloaded to a
stock kubelet and every pod could use it. Let the kubelet pull private images (a
pod bound to the node carrying the imagePullSecrets: the cluster pre-pull), or run
the image cache in-process in a kubelet built on the pullrecords library.`,
		Example: `  # caches.yaml
  - namespace: shared
    name: public
    images: [nginx:1.27, registry.k8s.io/pause:3.10]
  - namespace: ops
    name: tools
    refreshInterval: 24h
    images: [busybox:1.37]

  pullrecords cache apply -f caches.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErrorf("cache apply: -f FILE is required")
			}
			caches, err := readCacheFile(file)
			if err != nil {
				return err
			}
			if err := refusePrivate("cache apply", caches); err != nil {
				return err
			}
			m, err := o.offlineManager(g)
			if err != nil {
				return err
			}
			for _, c := range caches {
				if err := m.Apply(cmd.Context(), c); err != nil {
					return fmt.Errorf("cache %s/%s: %w", c.Namespace, c.Name, err)
				}
				fmt.Fprintf(g.stdout, "applied %s (%s)\n", esc(c.Ref().String()), plural(len(c.Images), "image"))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "YAML or JSON file with a list of image caches")
	return cmd
}

// refusePrivate refuses caches with a pull secret, naming them, with the two
// safe ways to pre-pull a private image. Nothing of a refused file is
// applied, and a run with one in its state does not start.
func refusePrivate(what string, caches []imagecache.ImageCache) error {
	var names []string
	for _, c := range caches {
		if c.PullSecret != nil {
			names = append(names, c.Ref().String())
		}
	}
	if len(names) == 0 {
		return nil
	}
	which := "cache " + names[0] + ": it has"
	if len(names) > 1 {
		which = "caches " + strings.Join(names, ", ") + ": they have"
	}
	return fmt.Errorf("%s: refusing %s a pullSecret, and this command pulls beside the kubelet, where a private image looks preloaded to a stock kubelet and every pod could use it (%w); "+
		"let the kubelet pull it (a pod bound to this node carrying the imagePullSecrets: the cluster pre-pull), "+
		"or run the image cache in-process in a kubelet built on the pullrecords library (it holds the records' lock and records the secret)",
		what, which, imagecache.ErrPrivateImage)
}

// cacheStatusView is one cache as "cache status" prints it.
type cacheStatusView struct {
	Cache           string         `json:"cache"`
	Images          []string       `json:"images"`
	Secret          string         `json:"pullSecret,omitempty"`
	RefreshInterval string         `json:"refreshInterval,omitempty"`
	Last            *lastRunStatus `json:"lastRun,omitempty"`
}

// lastRunStatus is the latest completed batch of a cache seen by "cache run".
type lastRunStatus struct {
	WorkType string         `json:"workType"`
	Finished time.Time      `json:"finished"`
	Counts   map[string]int `json:"counts"`
	Failures []string       `json:"failures,omitempty"`
}

func newCacheStatusCmd(g *globalOptions, o *cacheOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show declared image caches and the last run's results (read-only)",
		Long: `Show the declared image caches and the results of the last batch of each that
"cache run" completed. Nothing is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkKubeletDir(g.kubeletDir); err != nil {
				return err
			}
			state, statusFile := o.stateDirs(g)
			caches, err := imagecache.LoadState(state)
			if err != nil {
				return describeFSError(err)
			}
			last, err := readLastRun(statusFile)
			if err != nil {
				return err
			}
			views := []cacheStatusView{}
			for _, c := range caches {
				v := cacheStatusView{Cache: c.Ref().String(), Images: c.Images, Last: last[c.Ref().String()]}
				if c.PullSecret != nil {
					v.Secret = c.PullSecret.Namespace + "/" + c.PullSecret.Name
				}
				if c.RefreshInterval > 0 {
					v.RefreshInterval = c.RefreshInterval.String()
				}
				views = append(views, v)
			}
			return g.emit(views, func(w io.Writer) error {
				row(w, "CACHE", "IMAGES", "SECRET", "REFRESH", "LAST RUN")
				for _, v := range views {
					row(w, v.Cache, fmt.Sprint(len(v.Images)), orDash(v.Secret), orDash(v.RefreshInterval), v.Last.summary())
				}
				fmt.Fprintf(w, "\n%s\n", plural(len(views), "cache"))
				return nil
			})
		},
	}
}

func (l *lastRunStatus) summary() string {
	if l == nil {
		return "never run"
	}
	keys := make([]string, 0, len(l.Counts))
	for k := range l.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := l.WorkType + ":"
	for _, k := range keys {
		s += fmt.Sprintf(" %d %s", l.Counts[k], k)
	}
	return s
}

func readLastRun(path string) (map[string]*lastRunStatus, error) {
	out := map[string]*lastRunStatus{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, describeFSError(err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func writeLastRun(path string, last map[string]*lastRunStatus) error {
	data, err := json.MarshalIndent(last, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// A fresh temporary name, never a fixed one a symbolic link could be
	// planted at; fsync, rename, fsync the directory.
	return atomicfile.WriteFile(filepath.Dir(path), filepath.Base(path), append(data, '\n'), 0o600)
}

type cacheRunOptions struct {
	endpoint string
	once     bool
	workers  int
	timeout  time.Duration
	policy   string
}

func newCacheRunCmd(g *globalOptions, o *cacheOptions) *cobra.Command {
	r := &cacheRunOptions{}
	cmd := &cobra.Command{
		Use:   "run --cri ENDPOINT",
		Short: "Pull, refresh and purge the declared images through the CRI (anonymously; writes no records)",
		Long: `Work the image caches: resume unfinished work, pull what is missing, refresh caches
that have a refresh interval, and purge images dropped from caches. Runs until
interrupted; with --once it refreshes every cache once, waits for the work to
finish and exits (status 1 if any work failed).

It runs beside the kubelet as a standalone image cache: pulls are anonymous, an
image the runtime has counts as pulled, and nothing is written under
<kubelet dir>/image_manager (a running stock kubelet would not see it). It does
not start while an applied cache has a pullSecret (see "cache apply --help").

On a terminal a progress line is shown; otherwise one line per result.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCache(cmd.Context(), g, o, r)
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.endpoint, "cri", "", "CRI endpoint: unix:///path/to.sock or /path/to.sock (required)")
	f.BoolVar(&r.once, "once", false, "refresh every cache once, wait for the work, and exit")
	f.IntVar(&r.workers, "workers", imagecache.DefaultWorkers, "parallel pulls")
	f.DurationVar(&r.timeout, "timeout", 10*time.Second, "timeout of each CRI call other than pulls")
	f.StringVar(&r.policy, "policy", "", "no effect: cache run records nothing and asks no pull manager")
	_ = f.MarkDeprecated("policy", "cache run pulls anonymously and records nothing; the flag has no effect")
	return cmd
}

// progress prints results: a rewritten line on a terminal, plain lines
// otherwise.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	counts   map[imagecache.ImageWorkStatus]int
	failed   int
}

func (p *progress) result(r imagecache.ImageWorkResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[r.Status]++
	if r.Status == imagecache.StatusFailed || r.Status == imagecache.StatusUnknown {
		p.failed++
	}
	line := fmt.Sprintf("%-13s %-8s %s %s %s", r.Status, r.Request.WorkType, esc(r.Request.ImageCache.String()), esc(r.Request.Image), r.Reason)
	if r.Message != "" && r.Status != imagecache.StatusSucceeded && r.Status != imagecache.StatusAlreadyPulled {
		line += ": " + esc(r.Message)
	}
	if p.terminal {
		fmt.Fprintf(p.w, "\r\x1b[K%s  [%d succeeded, %d already pulled, %d failed]",
			line, p.counts[imagecache.StatusSucceeded], p.counts[imagecache.StatusAlreadyPulled], p.failed)
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) status(s imagecache.CacheStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintf(p.w, "%s %s batch %d complete: %s in %s\n", esc(s.ImageCache.String()), s.WorkType, s.Batch, plural(s.Requests, "request"), s.Duration.Round(time.Millisecond))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func runCache(parent context.Context, g *globalOptions, o *cacheOptions, r *cacheRunOptions) error {
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
	if r.endpoint == "" {
		return usageErrorf("--cri is required (for example unix:///run/containerd/containerd.sock)")
	}
	// Refuse before dialing: a cache with a pull secret in the state (an
	// older version applied it) must not be pulled from here.
	state, statusFile := o.stateDirs(g)
	applied, err := imagecache.LoadState(state)
	if err != nil {
		return describeFSError(err)
	}
	if err := refusePrivate("cache run", applied); err != nil {
		return err
	}
	svc, err := dialCRI(ctx, r.endpoint, r.timeout)
	if err != nil {
		return err
	}
	defer svc.Close()

	last, err := readLastRun(statusFile)
	if err != nil {
		return err
	}
	prog := &progress{w: g.stdout, terminal: isTerminal(g.stdout), counts: map[imagecache.ImageWorkStatus]int{}}
	var mu sync.Mutex
	waiting := map[string]uint64{} // cache -> batch --once waits for
	host, _ := os.Hostname()
	m, err := imagecache.NewStandalone(logger, svc,
		imagecache.WithStateDir(state),
		imagecache.WithWorkers(r.workers),
		imagecache.WithNode(host, ""),
		imagecache.WithResultHandler(prog.result),
		imagecache.WithStatusHandler(func(s imagecache.CacheStatus) {
			prog.status(s)
			mu.Lock()
			defer mu.Unlock()
			l := &lastRunStatus{WorkType: string(s.WorkType), Finished: s.Finished.UTC(), Counts: map[string]int{}}
			for k, v := range s.Counts {
				l.Counts[string(k)] = v
			}
			for _, res := range s.Results {
				if res.Status == imagecache.StatusFailed || res.Status == imagecache.StatusUnknown {
					l.Failures = append(l.Failures, res.Request.Image+": "+res.Reason)
				}
			}
			last[s.ImageCache.String()] = l
			if err := writeLastRun(statusFile, last); err != nil {
				logger.Error(err, "Cannot write the cache status file", "path", statusFile)
			}
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
	if r.once {
		caches := m.Caches()
		if len(caches) == 0 {
			fmt.Fprintln(g.stdout, "no image caches applied (use \"pullrecords cache apply -f FILE\")")
			return nil
		}
		// Wait for work resumed from the state dir; refresh the caches
		// that have none. Handlers run only once Run starts.
		mu.Lock()
		for _, c := range caches {
			st, ok := m.Status(c.Namespace, c.Name)
			if !ok || st.Complete {
				if err := m.Refresh(ctx, c.Namespace, c.Name); err != nil {
					mu.Unlock()
					return fmt.Errorf("cache %s: %w", c.Ref(), err)
				}
				st, _ = m.Status(c.Namespace, c.Name)
			}
			waiting[c.Ref().String()] = st.Batch
		}
		mu.Unlock()
	}
	if err := m.Run(ctx); err != nil {
		return err
	}
	prog.mu.Lock()
	failed := prog.failed
	prog.mu.Unlock()
	if r.once && failed > 0 {
		return fmt.Errorf("%w: %s failed", errProblemsFound, plural(failed, "request"))
	}
	return nil
}

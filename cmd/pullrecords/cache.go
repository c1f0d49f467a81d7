package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pullrecords/pullrecords/imagecache"
)

type cacheOptions struct {
	stateDir string
}

// paths returns the files of the state directory: <kubelet dir>/pullrecords
// unless --state-dir says otherwise.
func (o *cacheOptions) paths(g *globalOptions) cachePaths {
	base := o.stateDir
	if base == "" {
		base = filepath.Join(g.kubeletDir, "pullrecords")
	}
	return cachePaths{base: base, state: filepath.Join(base, "imagecache")}
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

  cache apply -f FILE|-       declare caches (YAML or JSON list); all or nothing
  cache delete NS/NAME...     stop keeping caches; their images are removed
  cache status                show the declared caches and the last run's results
  cache run                   do the work: pull, refresh, purge through the CRI,
                              and pick up apply and delete while running

apply and delete only declare (in <state dir>/caches.json); a running "cache run"
picks each change up within a second, without a restart, and one started later
applies what is declared. The state lives in <kubelet dir>/pullrecords (change
with --state-dir), never in <kubelet dir>/image_manager.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.PersistentFlags().StringVar(&o.stateDir, "state-dir", "", "directory for the declared caches and the cache manager's state (default <kubelet dir>/pullrecords)")
	cmd.AddCommand(newCacheApplyCmd(g, o), newCacheDeleteCmd(g, o), newCacheStatusCmd(g, o), newCacheRunCmd(g, o))
	return cmd
}

// readCacheInput reads a cache file, or standard input for "-".
func readCacheInput(cmd *cobra.Command, file string) (name string, data []byte, err error) {
	if file == "-" {
		data, err = readLimited("standard input", cmd.InOrStdin(), maxCacheFileSize)
		return "standard input", data, err
	}
	f, err := os.Open(file)
	if err != nil {
		return file, nil, describeFSError(err)
	}
	defer f.Close()
	data, err = readLimited(file, f, maxCacheFileSize)
	return file, data, err
}

// reportProblems lists every problem of a cache file on stderr when there
// is more than one; the error line then counts them.
func reportProblems(g *globalOptions, err error) {
	var fe *imagecache.CacheFileError
	if errors.As(err, &fe) && len(fe.Problems) > 1 {
		for _, p := range fe.Problems {
			fmt.Fprintf(g.stderr, "%s: %s\n", esc(fe.File), esc(p))
		}
	}
}

func toImageCaches(specs []cacheSpec) []imagecache.ImageCache {
	out := make([]imagecache.ImageCache, 0, len(specs))
	for _, s := range specs {
		out = append(out, s.imageCache())
	}
	return out
}

// sameDeclared reports whether two declared caches are the same version.
func sameDeclared(a, b cacheSpec) bool {
	ca, cb := a.imageCache(), b.imageCache()
	return ca.Ref() == cb.Ref() && slices.Equal(ca.Images, cb.Images) && ca.ForceFullCache == cb.ForceFullCache &&
		ca.RefreshInterval == cb.RefreshInterval && (ca.PullSecret == nil) == (cb.PullSecret == nil) &&
		(ca.PullSecret == nil || *ca.PullSecret == *cb.PullSecret)
}

func newCacheApplyCmd(g *globalOptions, o *cacheOptions) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Declare image caches from a YAML or JSON file or stdin (writes the state dir)",
		Long: `Declare image caches from a YAML or JSON list (at most 4 MiB; -f - reads standard
input). Each cache has a namespace, a name and a non-empty list of images, and
optionally forceFullCache and refreshInterval (such as 30m, 24h or 7d). A cache
of the same namespace/name is replaced; caches not in the file are kept (remove
them with "cache delete").

The whole file is checked first: every image must be a reference the kubelet
accepts, listed once per cache, each cache listed once; every problem is
reported, naming the cache and the field, and then nothing of the file is
applied. A running "cache run" picks the change up within a second; otherwise
the next "cache run" does the work.

All declared caches together may take at most 1 MiB as stored in
<state dir>/caches.json (indented JSON: an image costs its reference and about
12 bytes, so roughly 20,000 images of 40 characters): an apply or delete that
would store more is refused, naming the size and the largest cache, and
nothing is written. The limit keeps caches.json and the files "cache run"
derives from it readable by every later command.

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

  pullrecords cache apply -f caches.yaml
  kubectl get imagecaches -o yaml | yq '.items[].spec' | pullrecords cache apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErrorf("cache apply: -f FILE is required (-f - reads standard input)")
			}
			name, data, err := readCacheInput(cmd, file)
			if err != nil {
				return err
			}
			specs, err := parseCacheSpecs(name, data)
			if err != nil {
				reportProblems(g, err)
				return fmt.Errorf("cache apply: %w", err)
			}
			if err := refusePrivate("cache apply", toImageCaches(specs), ""); err != nil {
				return err
			}
			if err := checkKubeletDir(g.kubeletDir); err != nil {
				return err
			}
			paths := o.paths(g)
			var changes []declaredChange
			err = paths.updateDeclared(func(current []cacheSpec) ([]cacheSpec, error) {
				changes = nil
				for _, s := range specs {
					action := "created"
					i := slices.IndexFunc(current, func(c cacheSpec) bool { return c.ref() == s.ref() })
					switch {
					case i < 0:
						current = append(current, s)
					case sameDeclared(current[i], s):
						action = "unchanged"
					default:
						action = "configured"
						current[i] = s
					}
					changes = append(changes, declaredChange{Cache: s.ref(), Action: action, Images: len(s.Images)})
				}
				return current, nil
			})
			if err != nil {
				return fmt.Errorf("cache apply: %w", err)
			}
			return emitDeclared(g, paths, changes, "pulls the images")
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "YAML or JSON file with a list of image caches; - reads standard input")
	return cmd
}

// emitDeclared prints what apply or delete changed, and who does the work.
func emitDeclared(g *globalOptions, paths cachePaths, changes []declaredChange, work string) error {
	pid := runningCacheRun(paths.base)
	out := declaredOutput{Changes: changes, CacheRunPID: max(pid, 0)}
	running := pid != 0
	return g.emit(out, func(w io.Writer) error {
		for _, c := range changes {
			fmt.Fprintf(w, "%s %s (%s)\n", c.Action, esc(c.Cache), plural(c.Images, "image"))
		}
		switch {
		case out.CacheRunPID > 0:
			fmt.Fprintf(w, "cache run (PID %d) %s within a second\n", out.CacheRunPID, work)
		case running:
			fmt.Fprintf(w, "cache run %s within a second\n", work)
		default:
			fmt.Fprintf(w, "no cache run is working %s: the next \"pullrecords cache run\" %s\n", esc(paths.base), work)
		}
		return nil
	})
}

func newCacheDeleteCmd(g *globalOptions, o *cacheOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAMESPACE/NAME...",
		Short: "Stop keeping image caches; their images are removed (writes the state dir)",
		Long: `Delete declared image caches, named namespace/name as "cache status" shows them.
Every name is checked first; if one is not declared, nothing is deleted.

A running "cache run" picks the change up within a second and removes each image
of the deleted caches that no other cache lists; otherwise the next "cache run"
does.`,
		Example: `  pullrecords cache delete shared/public ops/tools`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				ns, name, ok := strings.Cut(a, "/")
				if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
					return usageErrorf("cache delete %s: name a cache as NAMESPACE/NAME, as \"cache status\" shows it", esc(a))
				}
			}
			if err := checkKubeletDir(g.kubeletDir); err != nil {
				return err
			}
			paths := o.paths(g)
			var changes []declaredChange
			err := paths.updateDeclared(func(current []cacheSpec) ([]cacheSpec, error) {
				changes = nil
				var missing []string
				for _, a := range args {
					if !slices.ContainsFunc(current, func(c cacheSpec) bool { return c.ref() == a }) {
						missing = append(missing, esc(a))
					}
				}
				if len(missing) > 0 {
					var declaredNames []string
					for _, c := range current {
						declaredNames = append(declaredNames, esc(c.ref()))
					}
					known := "none"
					if len(declaredNames) > 0 {
						known = strings.Join(declaredNames, ", ")
					}
					return nil, fmt.Errorf("no cache %s is declared (declared: %s); nothing deleted", strings.Join(missing, ", "), known)
				}
				kept := current[:0]
				for _, c := range current {
					if slices.Contains(args, c.ref()) {
						if !slices.ContainsFunc(changes, func(d declaredChange) bool { return d.Cache == c.ref() }) {
							changes = append(changes, declaredChange{Cache: c.ref(), Action: "deleted", Images: len(c.Images)})
						}
						continue
					}
					kept = append(kept, c)
				}
				return kept, nil
			})
			if err != nil {
				return fmt.Errorf("cache delete: %w", err)
			}
			return emitDeclared(g, paths, changes, "removes their images (those no other cache lists)")
		},
	}
}

// refusePrivate refuses caches with a pull secret, naming them, with the two
// safe ways to pre-pull a private image. Nothing of a refused file is
// applied, and a run with one declared does not start. hint, if set, ends
// the message.
func refusePrivate(what string, caches []imagecache.ImageCache, hint string) error {
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
	if hint != "" {
		hint = "; " + strings.ReplaceAll(hint, "NAMES", strings.Join(names, " "))
	}
	return fmt.Errorf("%s: refusing %s a pullSecret, and this command pulls beside the kubelet, where a private image looks preloaded to a stock kubelet and every pod could use it (%w); "+
		"let the kubelet pull it (a pod bound to this node carrying the imagePullSecrets: the cluster pre-pull), "+
		"or run the image cache in-process in a kubelet built on the pullrecords library (it holds the records' lock and records the secret)%s",
		what, which, imagecache.ErrPrivateImage, hint)
}

// cacheStatusView is one cache as "cache status" prints it.
type cacheStatusView struct {
	Cache           string         `json:"cache"`
	Images          []string       `json:"images"`
	Secret          string         `json:"pullSecret,omitempty"`
	RefreshInterval string         `json:"refreshInterval,omitempty"`
	State           string         `json:"state"`
	Last            *lastRunStatus `json:"lastRun,omitempty"`
}

// States of a cache in "cache status".
const (
	stateApplied  = "applied"  // declared, and cache run works it
	statePending  = "pending"  // declared or changed; cache run has not picked it up
	stateDeleting = "deleting" // deleted; cache run has not removed it yet
)

// lastRunStatus is the latest completed batch of a cache as "cache status"
// prints it: a view of the imagecache.CacheStatus the manager of "cache run"
// keeps in its state directory (imagecache.ReadLastStatus).
type lastRunStatus struct {
	WorkType string         `json:"workType"`
	Finished time.Time      `json:"finished"`
	Counts   map[string]int `json:"counts"`
	Failures []string       `json:"failures,omitempty"`
}

// lastRunOf returns the view of a completed batch's status.
func lastRunOf(s imagecache.CacheStatus) *lastRunStatus {
	l := &lastRunStatus{WorkType: string(s.WorkType), Finished: s.Finished.UTC(), Counts: map[string]int{}}
	for k, v := range s.Counts {
		l.Counts[string(k)] = v
	}
	for _, res := range s.Results {
		if resultFailed(res) {
			l.Failures = append(l.Failures, res.Request.Image+": "+res.Reason)
		}
	}
	return l
}

// readLastRuns returns the view of the last completed batch of each cache,
// by namespace/name, from the manager's state directory.
func readLastRuns(stateDir string) (map[string]*lastRunStatus, error) {
	last, err := imagecache.ReadLastStatus(stateDir)
	if err != nil {
		return nil, describeFSError(err)
	}
	out := make(map[string]*lastRunStatus, len(last))
	for ref, s := range last {
		out[ref.String()] = lastRunOf(s)
	}
	return out, nil
}

func newCacheStatusCmd(g *globalOptions, o *cacheOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show declared image caches and the last run's results (read-only)",
		Long: `Show the declared image caches, whether "cache run" has picked each one up (STATE:
applied, pending, or deleting for a deleted cache whose images are not removed
yet), and the results of the last batch of each that "cache run" completed.
Nothing is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkKubeletDir(g.kubeletDir); err != nil {
				return err
			}
			paths := o.paths(g)
			specs, _, err := paths.loadDeclared()
			if err != nil {
				return err
			}
			applied, err := imagecache.LoadState(paths.state)
			if err != nil {
				return describeFSError(err)
			}
			last, err := readLastRuns(paths.state)
			if err != nil {
				return err
			}
			views := []cacheStatusView{}
			add := func(s cacheSpec, state string) {
				c := s.imageCache()
				v := cacheStatusView{Cache: s.ref(), Images: s.Images, State: state, Last: last[s.ref()]}
				if c.PullSecret != nil {
					v.Secret = c.PullSecret.Namespace + "/" + c.PullSecret.Name
				}
				if c.RefreshInterval > 0 {
					v.RefreshInterval = c.RefreshInterval.String()
				}
				views = append(views, v)
			}
			for _, s := range specs {
				state := statePending
				i := slices.IndexFunc(applied, func(c imagecache.ImageCache) bool { return c.Ref().String() == s.ref() })
				if i >= 0 && sameDeclared(specOf(applied[i]), s) {
					state = stateApplied
				}
				add(s, state)
			}
			for _, c := range applied {
				if !slices.ContainsFunc(specs, func(s cacheSpec) bool { return s.ref() == c.Ref().String() }) {
					add(specOf(c), stateDeleting)
				}
			}
			sort.Slice(views, func(i, j int) bool { return views[i].Cache < views[j].Cache })
			pid := runningCacheRun(paths.base)
			return g.emit(views, func(w io.Writer) error {
				row(w, "CACHE", "IMAGES", "SECRET", "REFRESH", "STATE", "LAST RUN")
				for _, v := range views {
					row(w, v.Cache, fmt.Sprint(len(v.Images)), orDash(v.Secret), orDash(v.RefreshInterval), v.State, v.Last.summary())
				}
				fmt.Fprintf(w, "\n%s\n", plural(len(views), "cache"))
				waiting := slices.ContainsFunc(views, func(v cacheStatusView) bool { return v.State != stateApplied })
				switch {
				case pid > 0:
					fmt.Fprintf(w, "cache run (PID %d) is working them\n", pid)
				case pid < 0:
					fmt.Fprintln(w, "a cache run is working them")
				case waiting:
					fmt.Fprintln(w, "no cache run is working them: the next \"pullrecords cache run\" applies what is pending or deleting")
				}
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

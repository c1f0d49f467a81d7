package nodetest

import (
	"github.com/pullrecords/pullrecords/cluster/internal/childproc"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// containerdStartTimeout bounds the wait for containerd's socket.
const containerdStartTimeout = 30 * time.Second

// ContainerdOptions configures StartContainerd.
type ContainerdOptions struct {
	// Name names the containerd's directory and log. Required.
	Name string
	// SandboxImage is the CRI plugin's sandbox_image. Running pods needs
	// one that is pullable without credentials (a local registry); a
	// containerd that only pulls images may leave it empty (containerd's
	// default, which is not reachable here).
	SandboxImage string
	// InsecureRegistries are registry hosts (host:port) containerd reaches
	// over plain HTTP.
	InsecureRegistries []string
	// RegistryHosts, when not empty, switch containerd's CRI registry
	// configuration to hosts.toml files (config_path = Dir/certs.d, one
	// <Host>/hosts.toml per entry), which is what mirrors need; the
	// InsecureRegistries not named here get a hosts.toml of their own
	// (server = "http://<host>", no mirror), since containerd refuses its
	// older registry.mirrors section together with config_path.
	RegistryHosts []RegistryHost
	// ParentDir holds the containerd's directory (default os.TempDir()).
	// Keep it short: the socket paths must stay under 108 bytes.
	ParentDir string
	// LogDir, if set, receives the log <Name>-containerd.log (appended
	// to), which then outlives Stop; otherwise it is in Dir and removed
	// with it.
	LogDir string
}

// Containerd is a running containerd of its own: root, state, sockets, opt
// path, runc root and CNI bin and conf dirs (a bridge network of its own)
// under Dir. StartNode runs one per node; StartContainerd runs one alone.
type Containerd struct {
	Name string
	// Dir holds everything of this containerd and is removed by Stop.
	Dir string
	// Socket is the gRPC socket's path; CRIEndpoint is unix://Socket.
	Socket      string
	CRIEndpoint string
	// Bridge is the CNI bridge interface, created by the first pod that is
	// not on the host network.
	Bridge string

	opts     ContainerdOptions
	runcRoot string

	mu      sync.Mutex
	proc    *childproc.Process
	stopped bool
}

// StartContainerd starts a containerd in a new directory under
// opts.ParentDir and waits (bounded by ctx and 30 s) until its socket
// accepts connections. On error everything started is stopped and the
// directory removed (the log too, unless opts.LogDir keeps it).
func StartContainerd(ctx context.Context, opts ContainerdOptions) (_ *Containerd, err error) {
	if opts.Name == "" {
		return nil, errors.New("nodetest: ContainerdOptions needs Name")
	}
	if err := checkHostTools(); err != nil {
		return nil, err
	}
	if opts.LogDir != "" {
		if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(opts.ParentDir, "nt-"+opts.Name+"-")
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	c := &Containerd{
		Name:     opts.Name,
		Dir:      dir,
		Socket:   filepath.Join(dir, "containerd", "containerd.sock"),
		Bridge:   "nt" + randHex(5),
		opts:     opts,
		runcRoot: filepath.Join(dir, "runc"),
	}
	c.CRIEndpoint = "unix://" + c.Socket
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if len(c.Socket)+len(".ttrpc") >= 108 {
		return nil, fmt.Errorf("nodetest: socket path %s too long; use a shorter ParentDir", c.Socket)
	}
	if err := c.writeConfig(); err != nil {
		return nil, err
	}
	if err := c.StartDaemon(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Log is the path of containerd's log.
func (c *Containerd) Log() string {
	if c.opts.LogDir != "" {
		return filepath.Join(c.opts.LogDir, c.Name+"-containerd.log")
	}
	return filepath.Join(c.Dir, "containerd.log")
}

func (c *Containerd) writeConfig() error {
	cd := filepath.Join(c.Dir, "containerd")
	cniBin := filepath.Join(c.Dir, "cni", "bin")
	cniConf := filepath.Join(c.Dir, "cni", "conf")
	for _, d := range []string{cd, cniBin, cniConf, c.runcRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if err := os.Symlink(filepath.Join("/usr/lib/cni", p), filepath.Join(cniBin, p)); err != nil {
			return err
		}
	}
	conflist := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "nodetest-" + c.Name + "-" + c.Bridge,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      c.Bridge,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": pickSubnet()}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": filepath.Join(c.Dir, "cni", "ipam"),
			},
		}},
	}
	data, err := json.MarshalIndent(conflist, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-nodetest.conflist"), data, 0o644); err != nil {
		return err
	}
	var b strings.Builder
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	fmt.Fprintf(&b, `version = 2
root = %s
state = %s
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %s

[ttrpc]
  address = %s

[plugins."io.containerd.internal.v1.opt"]
  path = %s

[plugins."io.containerd.grpc.v1.cri"]
`, q(filepath.Join(cd, "root")), q(filepath.Join(cd, "state")), q(c.Socket), q(c.Socket+".ttrpc"),
		q(filepath.Join(cd, "opt")))
	if c.opts.SandboxImage != "" {
		fmt.Fprintf(&b, "  sandbox_image = %s\n", q(c.opts.SandboxImage))
	}
	fmt.Fprintf(&b, `  disable_cgroup = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %s
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %s
    conf_dir = %s
`, q(c.runcRoot), q(cniBin), q(cniConf))
	if len(c.opts.RegistryHosts) > 0 {
		certsD, err := writeHostsTOML(c.Dir, c.opts.RegistryHosts, c.opts.InsecureRegistries)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "  [plugins.\"io.containerd.grpc.v1.cri\".registry]\n    config_path = %s\n", q(certsD))
	} else {
		for _, h := range c.opts.InsecureRegistries {
			fmt.Fprintf(&b, "  [plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.%s]\n    endpoint = [%s]\n", q(h), q("http://"+h))
		}
	}
	return os.WriteFile(filepath.Join(cd, "config.toml"), []byte(b.String()), 0o644)
}

// StartDaemon starts the containerd process (again, after StopDaemon, on
// the same root and state) and waits, bounded by ctx and 30 s, until its
// socket accepts connections. If it does not, the process is stopped and
// the error carries the tail of its log.
func (c *Containerd) StartDaemon(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return fmt.Errorf("containerd %s is stopped", c.Name)
	}
	if c.proc != nil && !c.proc.Exited() {
		c.mu.Unlock()
		return fmt.Errorf("containerd %s already running", c.Name)
	}
	p, err := childproc.Start("containerd", "containerd", []string{"--config", filepath.Join(c.Dir, "containerd", "config.toml")}, nil, c.Log(), nil)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.proc = p
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, containerdStartTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	dialer := &net.Dialer{Timeout: time.Second}
	for {
		if conn, err := dialer.DialContext(ctx, "unix", c.Socket); err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("containerd %s exited: %v\n%s", c.Name, p.Err(), childproc.LogTail(c.Log(), 40))
		case <-ctx.Done():
			_ = p.Stop(5 * time.Second)
			return fmt.Errorf("containerd %s: waiting for %s: %w\n%s", c.Name, c.Socket, ctx.Err(), childproc.LogTail(c.Log(), 40))
		case <-tick.C:
		}
	}
}

// StopDaemon stops the containerd process (SIGTERM, SIGKILL after 10 s) and
// keeps its directory, so that StartDaemon can start it again; shims and
// containers keep running. A containerd not running is left as it is.
func (c *Containerd) StopDaemon() error {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	return p.Stop(10 * time.Second)
}

// exited reports whether the containerd process has ended.
func (c *Containerd) exited() (bool, error) {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p == nil {
		return true, nil
	}
	return p.Exited(), p.Err()
}

// Stop stops containerd and removes its directory: containerd, then
// whatever pod containers and shims of it are left (SIGKILL), their network
// namespaces, the bridge and runc cgroups, every mount under Dir (lazily).
// It is idempotent and safe on a partly started or nil Containerd.
func (c *Containerd) Stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	p := c.proc
	c.mu.Unlock()

	cgroups := c.runcCgroups()
	shims := procsWithArg(c.Socket)
	podProcs := descendants(shims)
	netns := map[uint64]bool{}
	for _, pid := range podProcs {
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil {
			netns[st.Ino] = true
		}
	}
	var hostNS syscall.Stat_t
	if syscall.Stat("/proc/self/ns/net", &hostNS) == nil {
		delete(netns, hostNS.Ino)
	}
	_ = p.Stop(10 * time.Second)
	// Shims started after the scan above (containerd was still running).
	shims = append(shims, procsWithArg(c.Socket)...)
	killAndWait(append(descendants(shims), podProcs...), 10*time.Second)
	killAndWait(shims, 10*time.Second)

	for _, d := range []string{"/run/netns", "/var/run/netns"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			var st syscall.Stat_t
			if syscall.Stat(p, &st) == nil && netns[st.Ino] {
				_ = syscall.Unmount(p, syscall.MNT_DETACH)
				_ = os.Remove(p)
			}
		}
	}
	_ = deleteLink(c.Bridge)
	// A cgroup whose last process was just killed can stay busy briefly.
	for i := 0; i < 50 && len(cgroups) > 0; i++ {
		var busy []string
		for _, cg := range cgroups {
			if err := syscall.Rmdir(cg); err != nil && !errors.Is(err, syscall.ENOENT) {
				busy = append(busy, cg)
			}
		}
		cgroups = busy
		if len(busy) > 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	_ = unmountAll(c.Dir)
	_ = os.RemoveAll(c.Dir)
}

// runcCgroups returns the cgroup directories runc recorded for the
// containers (state.json under the runc root), deepest first.
func (c *Containerd) runcCgroups() []string {
	var out []string
	_ = filepath.WalkDir(c.runcRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "state.json" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		var st struct {
			CgroupPaths map[string]string `json:"cgroup_paths"`
		}
		if json.Unmarshal(data, &st) == nil {
			for _, cg := range st.CgroupPaths {
				if strings.HasPrefix(cg, "/sys/fs/cgroup/") {
					out = append(out, cg)
				}
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

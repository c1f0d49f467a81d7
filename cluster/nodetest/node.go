package nodetest

import (
	"github.com/pullrecords/pullrecords/cluster/internal/childproc"

	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// APIServer is what a node needs of the API server it registers to;
// *apiservertest.Server implements it.
type APIServer interface {
	// NodeToken returns a bearer token authenticating as system:node:<node>
	// (group system:nodes), so that the Node authorizer applies.
	NodeToken(node string) string
	// WriteKubeconfig writes a kubeconfig for the server using token.
	WriteKubeconfig(path, token string) error
	// ConfigForToken returns a client configuration using token.
	ConfigForToken(token string) *rest.Config
}

// NodeOptions configures StartNode.
type NodeOptions struct {
	// Name is the node name (kubelet --hostname-override). Required.
	Name string
	// Server is the API server the kubelet registers to. Required.
	Server APIServer
	// Kubelet is the path of the kubelet program. Required.
	Kubelet string
	// SandboxImage is containerd's sandbox_image: it must be pullable
	// without credentials (a local registry; nothing else is reachable).
	SandboxImage string
	// InsecureRegistries are registry hosts (host:port) containerd reaches
	// over plain HTTP.
	InsecureRegistries []string
	// RegistryHosts configure containerd's registry hosts (mirrors) through
	// hosts.toml files; see ContainerdOptions.RegistryHosts.
	RegistryHosts []RegistryHost
	// RuntimeEndpoint, if set, is called once the node's containerd is up
	// and before the kubelet starts, with containerd's CRI endpoint; the
	// kubelet's container runtime and image service endpoint is what it
	// returns (a CRI proxy in front of containerd, which the function has
	// started and which must answer by the time it returns). An error
	// fails StartNode. Nil: the kubelet talks to containerd directly.
	RuntimeEndpoint func(ctx context.Context, containerdEndpoint string) (string, error)
	// Labels are set on the Node (kubelet --node-labels).
	Labels map[string]string
	// ParentDir holds the node's directory (default os.TempDir()). Keep it
	// short: containerd's socket paths must stay under 108 bytes.
	ParentDir string
	// NodeIP is the kubelet's --node-ip and serving address (default
	// MachineIP()).
	NodeIP string
	// ReadyTimeout bounds the wait for the Node to be Ready (default 60s).
	ReadyTimeout time.Duration
	// KubeletArgs are extra kubelet flags, appended last.
	KubeletArgs []string
	// LogDir, if set, receives the logs <Name>-kubelet.log and
	// <Name>-containerd.log (appended to), which then outlive Stop;
	// otherwise they are in Dir and removed with it.
	LogDir string
}

// Node is one running test node: a containerd of its own (see Containerd)
// and a kubelet.
type Node struct {
	Name string
	// Dir holds everything of the node and is removed by Stop.
	Dir string
	// RootDir is the kubelet's --root-dir; the kubelet's pull records are
	// under RootDir/image_manager.
	RootDir string
	// CRIEndpoint is containerd's CRI endpoint, unix://<socket>.
	CRIEndpoint string
	// KubeletEndpoint is the CRI endpoint the kubelet uses: CRIEndpoint,
	// or what NodeOptions.RuntimeEndpoint returned.
	KubeletEndpoint string
	// NodeIP is the node's InternalIP; KubeletPort its kubelet's HTTPS port
	// there, HealthzPort the kubelet's healthz port on 127.0.0.1.
	NodeIP      string
	KubeletPort int
	HealthzPort int
	// Bridge is the node's CNI bridge interface, created by the first pod
	// that is not on the host network.
	Bridge string

	opts        NodeOptions
	containerd  *Containerd
	kubeletArgs []string

	mu      sync.Mutex
	kubelet *childproc.Process
	stopped bool
}

// Log paths of the node's programs.
func (n *Node) KubeletLog() string {
	if n.opts.LogDir != "" {
		return filepath.Join(n.opts.LogDir, n.Name+"-kubelet.log")
	}
	return filepath.Join(n.Dir, "kubelet.log")
}

func (n *Node) ContainerdLog() string { return n.containerd.Log() }

func (n *Node) logs() string {
	return childproc.LogTail(n.KubeletLog(), 40) + "\n" + childproc.LogTail(n.ContainerdLog(), 25)
}

// checkHostTools reports missing programs with the Debian packages that hold
// them.
func checkHostTools() error {
	var missing []string
	for prog, pkg := range map[string]string{"containerd": "containerd", "containerd-shim-runc-v2": "containerd", "runc": "runc"} {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, prog+" (Debian package "+pkg+")")
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			missing = append(missing, "/usr/lib/cni/"+p+" (Debian package containernetworking-plugins)")
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("missing on this machine: %s", strings.Join(missing, ", "))
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// pickSubnet returns a random 10.x.y.0/24 that overlaps no address of the
// machine's interfaces.
func pickSubnet() string {
	var used []*net.IPNet
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				used = append(used, ipn)
			}
		}
	}
	for {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		ip := net.IPv4(10, 200+b[0]%50, b[1], 0)
		cand := &net.IPNet{IP: ip.To4(), Mask: net.CIDRMask(24, 32)}
		clash := false
		for _, u := range used {
			if u.Contains(cand.IP) || cand.Contains(u.IP) {
				clash = true
			}
		}
		if !clash {
			return cand.String()
		}
	}
}

// StartNode starts a node: its own containerd (StartContainerd) and a
// kubelet registering as opts.Name with the node's credentials, and waits
// until the Node is Ready. On error everything started is stopped.
func StartNode(ctx context.Context, opts NodeOptions) (_ *Node, err error) {
	if opts.Name == "" || opts.Server == nil || opts.Kubelet == "" {
		return nil, errors.New("nodetest: NodeOptions needs Name, Server and Kubelet")
	}
	if opts.SandboxImage == "" {
		return nil, errors.New("nodetest: NodeOptions.SandboxImage is required (nothing else is pullable here)")
	}
	if err := checkHostTools(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(opts.Kubelet); err != nil {
		return nil, fmt.Errorf("kubelet: %w", err)
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	if opts.NodeIP == "" {
		if opts.NodeIP, err = MachineIP(); err != nil {
			return nil, err
		}
	}
	cd, err := StartContainerd(ctx, ContainerdOptions{
		Name:               opts.Name,
		SandboxImage:       opts.SandboxImage,
		InsecureRegistries: opts.InsecureRegistries,
		RegistryHosts:      opts.RegistryHosts,
		ParentDir:          opts.ParentDir,
		LogDir:             opts.LogDir,
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", opts.Name, err)
	}
	n := &Node{
		Name:            opts.Name,
		Dir:             cd.Dir,
		RootDir:         filepath.Join(cd.Dir, "kubelet"),
		CRIEndpoint:     cd.CRIEndpoint,
		KubeletEndpoint: cd.CRIEndpoint,
		NodeIP:          opts.NodeIP,
		Bridge:          cd.Bridge,
		opts:            opts,
		containerd:      cd,
	}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	if opts.RuntimeEndpoint != nil {
		ep, err := opts.RuntimeEndpoint(ctx, cd.CRIEndpoint)
		if err != nil {
			return nil, fmt.Errorf("node %s: RuntimeEndpoint: %w", opts.Name, err)
		}
		n.KubeletEndpoint = ep
	}
	if err := n.writeKubeletConfig(); err != nil {
		return nil, err
	}
	if err := n.startUntilReady(ctx, opts.ReadyTimeout); err != nil {
		return nil, err
	}
	return n, nil
}

// kubeletStarts makes the kubelets of this process start one at a time.
// Every kubelet serves /var/lib/kubelet/device-plugins/kubelet.sock (a
// constant in the kubelet, not under --root-dir), clearing that directory
// first: two kubelets starting at once race for the socket, and one fails
// with "bind: address already in use" (seen in CI with three nodes).
var kubeletStarts sync.Mutex

// startUntilReady starts the kubelet and waits until the Node is Ready,
// holding kubeletStarts.
func (n *Node) startUntilReady(ctx context.Context, timeout time.Duration) error {
	kubeletStarts.Lock()
	defer kubeletStarts.Unlock()
	if err := n.StartKubelet(ctx); err != nil {
		return err
	}
	return n.waitReady(ctx, timeout)
}

func (n *Node) writeKubeletConfig() error {
	var err error
	if n.KubeletPort, err = freePort(); err != nil {
		return err
	}
	if n.HealthzPort, err = freePort(); err != nil {
		return err
	}
	for _, d := range []string{n.RootDir, filepath.Join(n.Dir, "kubelet-certs"), filepath.Join(n.Dir, "pod-logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	kubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := n.opts.Server.WriteKubeconfig(kubeconfig, n.opts.Server.NodeToken(n.Name)); err != nil {
		return fmt.Errorf("node %s: write kubeconfig: %w", n.Name, err)
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ""
readOnlyPort: 0
localStorageCapacityIsolation: false
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
address: %q
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
podLogsDir: %q
imageServiceEndpoint: %q
`, n.NodeIP, n.KubeletPort, n.HealthzPort, filepath.Join(n.Dir, "pod-logs"), n.KubeletEndpoint)
	cfgPath := filepath.Join(n.Dir, "kubelet-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	n.kubeletArgs = []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + cfgPath,
		"--container-runtime-endpoint=" + n.KubeletEndpoint,
		"--root-dir=" + n.RootDir,
		"--cert-dir=" + filepath.Join(n.Dir, "kubelet-certs"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.NodeIP,
		"--v=2",
	}
	if len(n.opts.Labels) > 0 {
		var kv []string
		for k, v := range n.opts.Labels {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		n.kubeletArgs = append(n.kubeletArgs, "--node-labels="+strings.Join(kv, ","))
	}
	n.kubeletArgs = append(n.kubeletArgs, n.opts.KubeletArgs...)
	return nil
}

// StartKubelet starts the node's kubelet (again, after StopKubelet) and
// waits until its healthz endpoint answers ok.
func (n *Node) StartKubelet(ctx context.Context) error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return fmt.Errorf("node %s is stopped", n.Name)
	}
	if n.kubelet != nil && !n.kubelet.Exited() {
		n.mu.Unlock()
		return fmt.Errorf("node %s: kubelet already running", n.Name)
	}
	p, err := childproc.Start("kubelet", n.opts.Kubelet, n.kubeletArgs, nil, n.KubeletLog(), nil)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	n.kubelet = p
	n.mu.Unlock()

	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", n.HealthzPort)
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		switch {
		case p.Exited():
			return fmt.Errorf("node %s: kubelet exited: %v\n%s", n.Name, p.Err(), n.logs())
		case ctx.Err() != nil:
			return fmt.Errorf("node %s: waiting for kubelet healthz: %w\n%s", n.Name, ctx.Err(), n.logs())
		case time.Now().After(deadline):
			return fmt.Errorf("node %s: kubelet healthz %s not ok in 60s\n%s", n.Name, url, n.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StopKubelet stops the kubelet (SIGTERM, SIGKILL after 10 s); containerd
// and the pods' containers keep running.
func (n *Node) StopKubelet() {
	n.mu.Lock()
	p := n.kubelet
	n.mu.Unlock()
	_ = p.Stop(10 * time.Second)
}

// waitReady waits until the Node object reports Ready, reading it with the
// node's own credentials.
func (n *Node) waitReady(ctx context.Context, timeout time.Duration) error {
	cfg := rest.CopyConfig(n.opts.Server.ConfigForToken(n.opts.Server.NodeToken(n.Name)))
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "not registered"
	for {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil {
			last = "no Ready condition"
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					if c.Status == corev1.ConditionTrue {
						return nil
					}
					last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				}
			}
		} else if ctx.Err() == nil {
			last = err.Error()
		}
		n.mu.Lock()
		k := n.kubelet
		n.mu.Unlock()
		if k.Exited() {
			return fmt.Errorf("node %s: kubelet exited before Ready: %v\n%s", n.Name, k.Err(), n.logs())
		}
		if exited, cerr := n.containerd.exited(); exited {
			return fmt.Errorf("node %s: containerd exited before Ready: %v\n%s", n.Name, cerr, n.logs())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready within %v (last: %s)\n%s", n.Name, timeout, last, n.logs())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops the node and removes its directory: the kubelet, then its
// containerd (Containerd.Stop: containerd, the pod containers and shims
// left, their network namespaces, bridge and cgroups, the mounts under the
// node's directory, the directory), then the /var/log/containers links
// into it. It is idempotent and safe on a partly started node.
func (n *Node) Stop() {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return
	}
	n.stopped = true
	k := n.kubelet
	n.mu.Unlock()

	_ = k.Stop(10 * time.Second)
	n.containerd.Stop()
	if ents, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, e := range ents {
			p := filepath.Join("/var/log/containers", e.Name())
			if t, err := os.Readlink(p); err == nil && strings.HasPrefix(t, n.Dir+"/") {
				_ = os.Remove(p)
			}
		}
	}
}

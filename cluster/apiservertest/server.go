package apiservertest

import (
	"github.com/pullrecords/pullrecords/cluster/internal/childproc"

	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KeepDirEnv names the environment variable that, when set to a non-empty
// value, makes Stop leave Server.Dir (logs, certificates, etcd data) in place.
const KeepDirEnv = "PULLRECORDS_APISERVERTEST_KEEP"

// Client rate limits of every rest.Config this package returns.
const (
	QPS   = 1000
	Burst = 2000
)

// Options configures Start.
type Options struct {
	// NodeNames are the kubelet identities to create static tokens for
	// (user system:node:<name>, group system:nodes).
	NodeNames []string
	// ExtraAPIServerFlags are appended to kube-apiserver's command line
	// (a later flag overrides an earlier one).
	ExtraAPIServerFlags []string
	// LogWriter, if not nil, receives etcd's and kube-apiserver's output
	// besides the log files in Server.Dir.
	LogWriter io.Writer
	// AuditLog makes the API server write an audit event, at Metadata
	// level, for every request it answers, to Server.AuditLogPath (read it
	// with ReadAudit): the way to count what a component costs the API
	// server, kubelets included.
	AuditLog bool
}

// Server is a running etcd + kube-apiserver pair on 127.0.0.1.
type Server struct {
	URL        string // https://127.0.0.1:PORT
	CAFile     string // the apiserver's self-signed serving certificate (cert-dir/apiserver.crt) to trust
	CAData     []byte
	AdminToken string       // static token of user admin, group system:masters
	Dir        string       // throwaway directory: certificates, keys, etcd data, logs
	Admin      *rest.Config // admin config with QPS 1000, Burst 2000
	// AuditLogPath is the API server's audit log when Options.AuditLog was
	// set, else empty.
	AuditLogPath string

	etcdURL    string
	nodeTokens map[string]string
	etcd       *childproc.Process
	apiserver  *childproc.Process

	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd and kube-apiserver from BinDir on free 127.0.0.1 ports
// and returns once /readyz answers ok to the admin. ctx bounds the start
// only; the processes run until Stop. On failure nothing is left running
// and the error carries the last lines of the failing process's log.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "apiservertest-")
	if err != nil {
		return nil, fmt.Errorf("apiservertest: temp dir: %w", err)
	}
	s := &Server{Dir: dir, nodeTokens: map[string]string{}}
	if opts.LogWriter != nil {
		// Both processes' output goroutines write to it.
		opts.LogWriter = &lockedWriter{w: opts.LogWriter}
	}
	if err := s.start(ctx, bin, opts); err != nil {
		if stopErr := s.Stop(); stopErr != nil {
			err = fmt.Errorf("%w (and stopping: %v)", err, stopErr)
		}
		return nil, fmt.Errorf("apiservertest: start: %w", err)
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, bin string, opts Options) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	clientPort, peerPort, securePort := ports[0], ports[1], ports[2]

	// etcd
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	etcdArgs := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(s.Dir, "etcd"),
		"--listen-client-urls=" + s.etcdURL,
		"--advertise-client-urls=" + s.etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	s.etcd, err = childproc.Start("etcd", filepath.Join(bin, "etcd"), etcdArgs, nil, filepath.Join(s.Dir, "etcd.log"), opts.LogWriter)
	if err != nil {
		return err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := waitReady(ctx, s.etcd, plain, s.etcdURL+"/health", "", func(body string) bool {
		return strings.Contains(body, `"health":"true"`)
	}); err != nil {
		return s.etcd.Failure(fmt.Errorf("etcd not healthy: %w", err))
	}

	// credentials
	s.AdminToken = randomToken()
	var tokens strings.Builder
	fmt.Fprintf(&tokens, "%s,admin,admin,system:masters\n", s.AdminToken)
	for _, node := range opts.NodeNames {
		if node == "" || strings.ContainsAny(node, ",\"\n") {
			return fmt.Errorf("invalid node name %q", node)
		}
		tok := randomToken()
		s.nodeTokens[node] = tok
		fmt.Fprintf(&tokens, "%s,system:node:%s,node:%s,system:nodes\n", tok, node, node)
	}
	tokenFile := filepath.Join(s.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tokens.String()), 0o600); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	saKey := filepath.Join(s.Dir, "sa.key")
	if err := writeRSAKey(saKey); err != nil {
		return err
	}
	certDir := filepath.Join(s.Dir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return fmt.Errorf("cert dir: %w", err)
	}

	// kube-apiserver
	s.URL = "https://127.0.0.1:" + strconv.Itoa(securePort)
	apiArgs := []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(securePort),
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--disable-admission-plugins=ServiceAccount",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true",
	}
	if opts.AuditLog {
		flags, err := s.auditFlags()
		if err != nil {
			return err
		}
		apiArgs = append(apiArgs, flags...)
	}
	apiArgs = append(apiArgs, opts.ExtraAPIServerFlags...)
	s.apiserver, err = childproc.Start("kube-apiserver", filepath.Join(bin, "kube-apiserver"), apiArgs, nil, filepath.Join(s.Dir, "kube-apiserver.log"), opts.LogWriter)
	if err != nil {
		return err
	}
	// The serving certificate does not exist before the apiserver writes it:
	// poll without verification, then check it with the written CA below.
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // readiness poll only
	}}
	defer insecure.CloseIdleConnections()
	if err := waitReady(ctx, s.apiserver, insecure, s.URL+"/readyz", s.AdminToken, func(body string) bool {
		return strings.TrimSpace(body) == "ok"
	}); err != nil {
		if s.etcd.Exited() {
			return s.etcd.Failure(fmt.Errorf("etcd exited while kube-apiserver started: %w", err))
		}
		return s.apiserver.Failure(fmt.Errorf("kube-apiserver not ready: %w", err))
	}

	s.CAFile = filepath.Join(certDir, "apiserver.crt")
	s.CAData, err = os.ReadFile(s.CAFile)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	s.Admin = s.ConfigForToken(s.AdminToken)
	cs, err := kubernetes.NewForConfig(s.Admin)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		return s.apiserver.Failure(fmt.Errorf("GET /version with the admin config and %s: %w", s.CAFile, err))
	}
	return nil
}

// waitReady polls url until ok(body) holds for a 200 answer, the process
// exits or ctx ends.
func waitReady(ctx context.Context, p *childproc.Process, c *http.Client, url, token string, ok func(string) bool) error {
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && ok(string(body)) {
				return nil
			}
			last = fmt.Sprintf("GET %s: %s: %s", url, resp.Status, tail(body, 10))
		} else {
			last = err.Error()
		}
		select {
		case <-p.Done():
			return fmt.Errorf("process exited (%v); last probe: %s", p.Err(), last)
		case <-ctx.Done():
			return fmt.Errorf("%w; last probe: %s", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. The ports are
// released before use, so another process may take one in between (rare).
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// writeRSAKey writes a new RSA 2048 private key (PKCS#1 PEM) to path; the
// apiserver derives the public key for verification from it.
func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	return nil
}

// Stop stops kube-apiserver and then etcd (SIGTERM to each one's process
// group, SIGKILL a few seconds later), waits until both are reaped and
// removes Dir (unless $PULLRECORDS_APISERVERTEST_KEEP is set). It is safe to
// call more than once and concurrently; later calls return the first result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		for _, p := range []*childproc.Process{s.apiserver, s.etcd} {
			if p == nil {
				continue
			}
			if err := p.Stop(termGrace); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == 0 && s.Dir != "" && os.Getenv(KeepDirEnv) == "" {
			if err := os.RemoveAll(s.Dir); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", s.Dir, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			s.stopErr = fmt.Errorf("apiservertest: stop: %w", err)
		}
	})
	return s.stopErr
}

// PIDs returns the process ids of kube-apiserver and etcd (those started).
// Each is also its process group's id.
func (s *Server) PIDs() []int {
	var pids []int
	for _, p := range []*childproc.Process{s.apiserver, s.etcd} {
		if p != nil {
			pids = append(pids, p.PID())
		}
	}
	return pids
}

// EtcdURL returns etcd's client URL (http://127.0.0.1:PORT).
func (s *Server) EtcdURL() string { return s.etcdURL }

// NodeNames returns the nodes that have static tokens, sorted.
func (s *Server) NodeNames() []string {
	names := make([]string, 0, len(s.nodeTokens))
	for n := range s.nodeTokens {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NodeToken returns the static token of user system:node:<node> (group
// system:nodes), or "" if node was not in Options.NodeNames.
func (s *Server) NodeToken(node string) string { return s.nodeTokens[node] }

// ConfigForToken returns a config for the server authenticating with the
// bearer token, with QPS 1000 and Burst 2000.
func (s *Server) ConfigForToken(token string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), s.CAData...)},
		QPS:             QPS,
		Burst:           Burst,
	}
}

// WriteKubeconfig writes a kubeconfig file (server, embedded CA, token) to
// path, e.g. for a kubelet.
func (s *Server) WriteKubeconfig(path, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["apiservertest"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.CAData}
	cfg.AuthInfos["apiservertest"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["apiservertest"] = &clientcmdapi.Context{Cluster: "apiservertest", AuthInfo: "apiservertest"}
	cfg.CurrentContext = "apiservertest"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("apiservertest: kubeconfig %s: %w", path, err)
	}
	return nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

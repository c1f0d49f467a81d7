package nodetest

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// RegistryHost is containerd's configuration of one registry host (a
// hosts.toml file under config_path).
type RegistryHost struct {
	// Host is the registry as image references name it (host:port), e.g.
	// 127.0.0.1:5000.
	Host string
	// Server is the URL of the registry itself, e.g. http://127.0.0.1:5000
	// (default http://<Host>); containerd uses it when no mirror answers.
	Server string
	// Mirrors are URLs (http://127.0.0.1:PORT) containerd asks first, in
	// order, to pull and resolve images of Host (capabilities pull and
	// resolve). containerd 1.6 sends a mirror the pull's credential when the
	// CRI request's AuthConfig names no server address, which is how the
	// kubelet sends a pod secret's credential (its keyring leaves the
	// address empty): a mirror then receives the tenant's credential, and
	// may serve without asking for it.
	Mirrors []string
}

// writeHostsTOML writes dir/certs.d/<host>/hosts.toml for every host, and
// for every insecure registry not among them (server http://<host>), and
// returns the certs.d directory.
func writeHostsTOML(dir string, hosts []RegistryHost, insecure []string) (string, error) {
	certsD := filepath.Join(dir, "certs.d")
	all := append([]RegistryHost(nil), hosts...)
	named := map[string]bool{}
	for _, h := range hosts {
		named[h.Host] = true
	}
	for _, h := range insecure {
		if !named[h] {
			named[h] = true
			all = append(all, RegistryHost{Host: h})
		}
	}
	for _, h := range all {
		if h.Host == "" || strings.ContainsAny(h.Host, "/\\") || h.Host == "." || h.Host == ".." {
			return "", fmt.Errorf("nodetest: RegistryHost: bad Host %q (want host[:port])", h.Host)
		}
		server := h.Server
		if server == "" {
			server = "http://" + h.Host
		}
		var b strings.Builder
		for _, u := range append([]string{server}, h.Mirrors...) {
			if pu, err := url.Parse(u); err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
				return "", fmt.Errorf("nodetest: RegistryHost %s: %q is not an http(s) URL", h.Host, u)
			}
		}
		fmt.Fprintf(&b, "server = %q\n", server)
		for _, m := range h.Mirrors {
			fmt.Fprintf(&b, "\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", m)
		}
		d := filepath.Join(certsD, h.Host)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(b.String()), 0o644); err != nil {
			return "", err
		}
	}
	return certsD, nil
}

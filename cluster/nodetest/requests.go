package nodetest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// RegistryRequest is one HTTP request a registry served, from its access
// log.
type RegistryRequest struct {
	Method string
	// Path is the request's path, without the query.
	Path string
	// Status is the HTTP status the registry answered.
	Status int
	// UserAgent is the client's User-Agent header ("" when it sent none):
	// containerd's is "containerd/…", docker-registry's as a pull-through
	// cache "Go-http-client/1.1".
	UserAgent string
}

// IsBlob reports whether the request is for a blob (/v2/<name>/blobs/…),
// uploads included.
func (r RegistryRequest) IsBlob() bool { return strings.Contains(r.Path, "/blobs/") }

// IsManifest reports whether the request is for a manifest
// (/v2/<name>/manifests/<reference>).
func (r RegistryRequest) IsManifest() bool { return strings.Contains(r.Path, "/manifests/") }

// accessLogLine matches the Apache combined log format docker-registry
// writes for every request it served: remote, identity, user, [time],
// "METHOD URI PROTO", status, size, "referer", "user agent".
var accessLogLine = regexp.MustCompile(`^\S+ \S+ \S+ \[[^\]]*\] "(\S+) (\S+) [^"]*" (\d{3}) \S+ "(?:[^"\\]|\\.)*" "((?:[^"\\]|\\.)*)"`)

// Requests returns the requests the registry served so far, oldest first,
// read from its access log. A request is there once the registry finished
// serving it, which may be a moment after its client got the answer. The
// registry's own messages are JSON lines and are skipped.
func (r *Registry) Requests() ([]RegistryRequest, error) {
	data, err := os.ReadFile(r.LogPath())
	if err != nil {
		return nil, err
	}
	return parseAccessLog(data), nil
}

// LogPath is the path of the registry's log (its messages and access log).
func (r *Registry) LogPath() string { return filepath.Join(r.dir, "registry.log") }

func parseAccessLog(data []byte) []RegistryRequest {
	var out []RegistryRequest
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		m := accessLogLine.FindSubmatch(sc.Bytes())
		if m == nil {
			continue
		}
		status, _ := strconv.Atoi(string(m[3]))
		path, _, _ := strings.Cut(string(m[2]), "?")
		ua := string(m[4])
		if ua == "-" {
			ua = ""
		}
		out = append(out, RegistryRequest{Method: string(m[1]), Path: path, Status: status, UserAgent: strings.ReplaceAll(ua, `\"`, `"`)})
	}
	return out
}

package apiservertest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// auditPolicy logs every request once, when the response is complete
// (watches when they end), with who asked and for what, never bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// auditFlags writes the audit policy into s.Dir and returns the API
// server's flags that turn the log on, synchronously (blocking mode), so an
// answered request is in the file when its client sees the answer.
func (s *Server) auditFlags() ([]string, error) {
	policy := filepath.Join(s.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("audit policy: %w", err)
	}
	s.AuditLogPath = filepath.Join(s.Dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + s.AuditLogPath,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=0",
	}, nil
}

// AuditEvent is the part of an audit.k8s.io/v1 Event that counting needs.
type AuditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp string `json:"requestReceivedTimestamp"`
}

// Resource is the event's resource with its subresource ("pods/status"),
// or "" for a non-resource request (/healthz, /version).
func (e AuditEvent) Resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// Namespace is the event's object namespace, or "".
func (e AuditEvent) Namespace() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Namespace
}

// ReadAudit reads the audit log at path: one event per completed request
// (stage ResponseComplete, or Panic), in the order the API server wrote
// them. A line that does not parse is an error naming its number.
func ReadAudit(path string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for line := 1; sc.Scan(); line++ {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if e.Stage == "ResponseComplete" || e.Stage == "Panic" {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitFile is a parsed systemd unit: section -> key -> values in order
// (a key may repeat).
type unitFile map[string]map[string][]string

// parseUnit reads a unit file as systemd does for the subset used here:
// [Section] headers, Key=Value lines, # and ; comments, and lines continued
// with a trailing backslash. Anything else is an error.
func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	n := 0
	var pending string
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if u[section] != nil {
				t.Errorf("%s:%d: section [%s] twice", path, n, section)
			}
			u[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a Key=Value line in a section: %q", path, n, line)
			}
			key = strings.TrimSpace(key)
			u[section][key] = append(u[section][key], strings.TrimSpace(value))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if pending != "" {
		t.Fatalf("%s: ends inside a continued line", path)
	}
	return u
}

func (u unitFile) last(section, key string) (string, bool) {
	v := u[section][key]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

const unitPath = "../../deploy/systemd/pullrecords-cache.service"

// TestSystemdUnit checks the unit for "cache run": its command line is one
// this command accepts, it runs with the hardening the README promises, and
// it may write only the state directory. With systemd-analyze on the
// machine, systemd itself checks the file too.
func TestSystemdUnit(t *testing.T) {
	u := parseUnit(t, unitPath)
	for _, s := range []string{"Unit", "Service", "Install"} {
		if u[s] == nil {
			t.Errorf("no [%s] section", s)
		}
	}
	if d, _ := u.last("Unit", "Description"); d == "" {
		t.Error("no Description")
	}

	exec0, _ := u.last("Service", "ExecStart")
	argv := strings.Fields(exec0)
	if len(argv) < 3 || !filepath.IsAbs(argv[0]) || filepath.Base(argv[0]) != "pullrecords" {
		t.Fatalf("ExecStart %q: want an absolute path to pullrecords and its arguments", exec0)
	}
	// The arguments are this command's: the subcommand is "cache run" and
	// every flag exists and parses.
	root := newRootCmd(io.Discard, io.Discard)
	cmd, rest, err := root.Find(argv[1:])
	if err != nil || cmd.CommandPath() != "pullrecords cache run" {
		t.Fatalf("ExecStart runs %q (%v), want pullrecords cache run", cmd.CommandPath(), err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("ExecStart flags: %v", err)
	}
	if len(cmd.Flags().Args()) != 0 {
		t.Errorf("ExecStart has stray arguments %q", cmd.Flags().Args())
	}
	if addr := cmd.Flags().Lookup("metrics-addr").Value.String(); addr != "" {
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Errorf("--metrics-addr %q: the plain-HTTP endpoint must listen on loopback in the shipped unit", addr)
		}
	}
	kubeletDir := cmd.Flags().Lookup("kubelet-dir").Value.String()
	stateDir := filepath.Join(kubeletDir, "pullrecords")
	if sd := cmd.Flags().Lookup("state-dir").Value.String(); sd != "" {
		stateDir = sd
	}

	for key, want := range map[string]string{
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"CapabilityBoundingSet":   "",
		"AmbientCapabilities":     "",
		"RestrictSUIDSGID":        "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectControlGroups":    "yes",
		"RestrictNamespaces":      "yes",
		"LockPersonality":         "yes",
		"MemoryDenyWriteExecute":  "yes",
		"SystemCallArchitectures": "native",
		"UMask":                   "0077",
		"IPAddressDeny":           "any",
		"KillSignal":              "SIGTERM",
	} {
		got, ok := u.last("Service", key)
		if !ok || got != want {
			t.Errorf("[Service] %s=%q (set: %t), want %q", key, got, ok, want)
		}
	}
	families, _ := u.last("Service", "RestrictAddressFamilies")
	if !strings.Contains(families, "AF_UNIX") {
		t.Errorf("RestrictAddressFamilies=%q: the CRI socket needs AF_UNIX", families)
	}
	// The state directory is the only place it may write.
	rw := strings.Join(u["Service"]["ReadWritePaths"], " ")
	if strings.Fields(rw) == nil || strings.Fields(rw)[0] != stateDir || len(strings.Fields(rw)) != 1 {
		t.Errorf("ReadWritePaths=%q, want exactly the state directory %s", rw, stateDir)
	}
	if sd, _ := u.last("Service", "StateDirectory"); "/var/lib/"+sd != stateDir {
		t.Errorf("StateDirectory=%q does not create %s", sd, stateDir)
	}

	verifyWithSystemd(t, unitPath)
}

// verifyWithSystemd runs "systemd-analyze verify" on a copy of the unit
// whose ExecStart points at an executable that exists here (this test
// binary): any complaint, not only a failing status, fails the test, since
// systemd-analyze reports unknown or bad values as warnings.
func verifyWithSystemd(t *testing.T, path string) {
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not found: checked the parsed unit only")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), filepath.Base(path))
	unit := strings.ReplaceAll(string(data), "/usr/local/bin/pullrecords", self)
	if err := os.WriteFile(copyPath, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "verify", "--man=no", copyPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestParseUnitRejectsJunk keeps the parser honest.
func TestParseUnitRejectsJunk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.service")
	if err := os.WriteFile(path, []byte("[Service]\nExecStart=/bin/a \\\n  --b\n# c\nKey=1\nKey=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := parseUnit(t, path)
	if got, _ := u.last("Service", "ExecStart"); got != "/bin/a  --b" {
		t.Errorf("continued line %q", got)
	}
	if got := u["Service"]["Key"]; len(got) != 2 || got[1] != "2" {
		t.Errorf("repeated key %q", got)
	}
}

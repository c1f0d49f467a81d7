package nodetest

import (
	"github.com/pullrecords/pullrecords/cluster/internal/childproc"

	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PIDFileEnv names the environment variable that, when set, makes every
// process this package starts append its PID (one a line) to that file, so
// that a calling script can stop them even if the test binary dies.
const PIDFileEnv = childproc.PIDFileEnv

var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// freePort returns a TCP port that is free on all addresses now and that this
// process has not handed out before.
func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !ports[port] {
			ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free port found")
}

// MachineIP returns the machine's non-loopback IPv4 address: eth0's when it
// has one, otherwise the first IPv4 address of an up, non-loopback interface.
// The kubelet serves on it and reports it as the node's InternalIP (the
// kubelet rejects a loopback --node-ip).
func MachineIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	sort.SliceStable(ifaces, func(i, j int) bool { return ifaces[i].Name == "eth0" && ifaces[j].Name != "eth0" })
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("no non-loopback IPv4 address on any interface")
}

// procAlive reports whether pid exists and is not a zombie.
func procAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	return data[i+2] != 'Z' && data[i+2] != 'X'
}

// procTable maps every PID to its parent PID.
func procTable() map[int]int {
	parents := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parents[pid] = ppid
	}
	return parents
}

// procsWithArg returns the PIDs whose command line contains arg as one of
// its arguments.
func procsWithArg(arg string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(data, []byte{0}) {
			if string(a) == arg {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// descendants returns all descendants of the given roots (not the roots).
func descendants(roots []int) []int {
	parents := procTable()
	children := map[int][]int{}
	for pid, ppid := range parents {
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	queue := append([]int(nil), roots...)
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// killAndWait SIGKILLs pids and waits (up to timeout) until none is alive.
func killAndWait(pids []int, timeout time.Duration) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		alive := false
		for _, pid := range pids {
			if procAlive(pid) {
				alive = true
				break
			}
		}
		if !alive {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		mp := unescapeMount(f[1])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll lazily unmounts everything at or below dir; shared mounts can
// reappear by propagation, so it repeats until none is left.
func unmountAll(dir string) error {
	for i := 0; i < 20; i++ {
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	if mps := mountsUnder(dir); len(mps) > 0 {
		return fmt.Errorf("still mounted under %s: %v", dir, mps)
	}
	return nil
}

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/fsstore"
)

// moduleRoot is the repository root; tests run in the package directory.
var moduleRoot, _ = filepath.Abs(filepath.Join("..", ".."))

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script/*.txtar")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"pullrecords": func() {
			os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
		},
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup:               setupScript,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"status":     cmdStatus,
			"notcri":     cmdNotCRI,
			"fixmodes":   cmdFixModes,
			"upstreamfx": cmdUpstreamFixtures,
			"fakecri":    cmdFakeCRI,
			"grpcnotcri": cmdGRPCNotCRI,
			"criid":      cmdCRIID,
			"holdlock":   cmdHoldLock,
			"healthz":    cmdHealthz,
			"bigfile":    cmdBigFile,
			"setenvq":    cmdSetenvQuoted,
			"pulledago":  cmdPulledAgo,
		},
	})
}

// setupScript gives record trees from the archive the modes the kubelet
// uses; txtar files are created 0666/0777 minus umask.
// It also makes the running-kubelet check hermetic: a /proc (outside $WORK)
// whose one process is not a kubelet, and a healthz endpoint that accepts
// connections and never answers HTTP, unless a script sets
// PULLRECORDS_PROC_ROOT or PULLRECORDS_KUBELET_HEALTHZ_URL.
func setupScript(env *testscript.Env) error {
	env.Setenv("HOME", env.WorkDir)
	proc, err := os.MkdirTemp("", "pullrecords-proc-")
	if err != nil {
		return err
	}
	env.Defer(func() { os.RemoveAll(proc) })
	if err := os.Mkdir(filepath.Join(proc, "1"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(proc, "1", "comm"), []byte("init\n"), 0o600); err != nil {
		return err
	}
	env.Setenv(envProcRoot, proc)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	env.Defer(func() { silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	env.Setenv(envHealthzURL, "http://"+silent.Addr().String()+"/healthz")
	return fixModes(env.WorkDir)
}

func fixModes(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if d.IsDir() {
			return os.Chmod(path, 0o700)
		}
		return os.Chmod(path, 0o600)
	})
}

// cmdFixModes: fixmodes DIR — reset the modes of a tree created later in the
// script (for example by cp).
func cmdFixModes(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fixmodes DIR")
	}
	ts.Check(fixModes(ts.MkAbs(args[0])))
}

// cmdStatus: status N COMMAND ARGS... — run COMMAND and require exit status N.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// cmdNotCRI: notcri PATH — listen on a unix socket at PATH that accepts
// connections and answers garbage, like a socket of some other service.
func cmdNotCRI(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: notcri PATH")
	}
	l, err := net.Listen("unix", ts.MkAbs(args[0]))
	ts.Check(err)
	ts.Defer(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\nnot a CRI endpoint\n"))
			c.Close()
		}
	}()
}

// cmdUpstreamFixtures: upstreamfx kubelet|broken DIR — copy the repository's
// shared kubelet-format testdata to the kubelet directory DIR: "kubelet"
// (testdata/kubelet/{pulling,pulled}) becomes DIR/image_manager, and every
// file of "broken" (testdata/broken) is stored as a pulled record named after
// the hash of its own file name.
func cmdUpstreamFixtures(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: upstreamfx kubelet|broken DIR")
	}
	src := filepath.Join(moduleRoot, "testdata", args[0])
	dst := filepath.Join(ts.MkAbs(args[1]), fsstore.DirName)
	switch args[0] {
	case "kubelet":
		ts.Check(os.CopyFS(dst, os.DirFS(src)))
	case "broken":
		entries, err := os.ReadDir(src)
		ts.Check(err)
		ts.Check(os.MkdirAll(filepath.Join(dst, fsstore.IntentsDir), 0o700))
		ts.Check(os.MkdirAll(filepath.Join(dst, fsstore.RecordsDir), 0o700))
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(src, e.Name()))
			ts.Check(err)
			ts.Check(os.WriteFile(filepath.Join(dst, fsstore.RecordsDir, fsstore.FileName(e.Name())), data, 0o600))
		}
	default:
		ts.Fatalf("upstreamfx: unknown testdata %q", args[0])
	}
	ts.Check(fixModes(ts.MkAbs(args[1])))
}

// cmdHoldLock: holdlock KUBELETDIR — open the records under KUBELETDIR
// writable in the test process, holding their lock until the script ends,
// as a kubelet built on this library (or another writer) does. Sets
// LOCKPID to the holder's PID.
func cmdHoldLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: holdlock KUBELETDIR")
	}
	s, err := fsstore.New(klog.Background(), ts.MkAbs(args[0]), fsstore.WithoutSync())
	ts.Check(err)
	ts.Defer(func() { s.Close() })
	ts.Setenv("LOCKPID", strconv.Itoa(os.Getpid()))
}

// cmdHealthz: healthz CODE — serve a fake kubelet healthz endpoint that
// answers CODE until the script ends, and set HEALTHZ to its URL.
func cmdHealthz(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: healthz CODE")
	}
	code, err := strconv.Atoi(args[0])
	ts.Check(err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
	ts.Defer(srv.Close)
	ts.Setenv("HEALTHZ", srv.URL+"/healthz")
}

// cmdBigFile: bigfile NAME SIZE — write SIZE bytes of a valid-looking YAML
// comment to NAME.
func cmdBigFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: bigfile NAME SIZE")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	data := bytes.Repeat([]byte("#"), n)
	if n > 0 {
		data[n-1] = '\n'
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), data, 0o600))
}

// cmdSetenvQuoted: setenvq NAME "GO-QUOTED" — set NAME to the unquoted Go
// string, so a script can pass control characters as arguments.
func cmdSetenvQuoted(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: setenvq NAME GO-QUOTED-STRING")
	}
	v, err := strconv.Unquote(args[1])
	ts.Check(err)
	ts.Setenv(args[0], v)
}

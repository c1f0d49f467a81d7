package critest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
)

// maxSocketPath is the longest unix socket path every supported system
// accepts: sun_path is 108 bytes on Linux and 104 on the BSDs and macOS,
// both counting the terminating NUL.
const maxSocketPath = 103

// Server is a gRPC server listening on a unix socket.
type Server struct {
	grpc *grpc.Server
	path string
	done chan struct{}
}

// Listen serves gRPC on a unix socket at path, with the services register
// installs (none: a gRPC server that answers every call Unimplemented),
// until Stop. path must not exist and must be short enough for a socket
// address.
func Listen(path string, register ...func(*grpc.Server)) (*Server, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("critest: socket path %q is %d bytes, longer than the %d a unix socket address holds; use a shorter directory", path, len(path), maxSocketPath)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("critest: %w", err)
	}
	s := &Server{grpc: grpc.NewServer(), path: path, done: make(chan struct{})}
	for _, r := range register {
		r(s.grpc)
	}
	go func() {
		defer close(s.done)
		_ = s.grpc.Serve(l)
	}()
	return s, nil
}

// Start is Listen on a socket in a fresh directory, stopped and removed
// when t's test ends. The directory is made with os.MkdirTemp rather than
// t.TempDir, whose paths grow with the test's name past what a socket
// address holds.
func Start(t testing.TB, register ...func(*grpc.Server)) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "critest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s, err := Listen(filepath.Join(dir, "cri.sock"), register...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Endpoint is the socket's address as a CRI endpoint: "unix://" + Path.
func (s *Server) Endpoint() string { return "unix://" + s.path }

// Stop closes the listener and every connection, and returns when the
// server has stopped. It may be called more than once.
func (s *Server) Stop() {
	s.grpc.Stop()
	<-s.done
}

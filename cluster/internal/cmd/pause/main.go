// Command pause is the sandbox ("pause") program of the test nodes that
// cluster/nodetest starts, and a container command for test pods: built
// static (CGO_ENABLED=0), it needs nothing from the image but itself.
//
// Without flags it blocks until SIGTERM or SIGINT and then exits 0, as a pod
// sandbox must. With -exit-after D (D >= 0) it exits 0 after D instead, so a
// pod with restartPolicy Never reaches Succeeded; -exit-code N makes that
// exit (not the one on a signal) use N.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	exitAfter := flag.Duration("exit-after", -1, "exit after this duration (negative: wait for SIGTERM or SIGINT)")
	exitCode := flag.Int("exit-code", 0, "exit status when -exit-after elapses")
	flag.Parse()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	var timeout <-chan time.Time
	if *exitAfter >= 0 {
		timeout = time.After(*exitAfter)
	}
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", s)
		os.Exit(0)
	case <-timeout:
		os.Exit(*exitCode)
	}
}

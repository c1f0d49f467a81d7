package demo_test

import (
	"context"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/cmd/pullrecords/internal/demo"
)

// Run plays the default scenario in a kubelet directory and reports every
// event as it happens.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "demo-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	starts := 0
	sum, err := demo.Run(context.Background(), demo.Config{
		KubeletDir: dir,
		Logger:     klog.Background(),
		NoSync:     true,
		OnEvent: func(e demo.Event) {
			if e.Kind == demo.KindStart {
				starts++
			}
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d pod starts, %d decisions, %d pulled records on disk\n", starts, sum.Decisions, sum.Records)
	// Output:
	// 24 pod starts, 19 decisions, 7 pulled records on disk
}

package criproxy

import (
	"testing"

	"google.golang.org/grpc/codes"
)

// BenchmarkCountForwarded is what counting adds to each forwarded call,
// without the noise of the calls themselves.
func BenchmarkCountForwarded(b *testing.B) {
	for _, bc := range []struct {
		name string
		m    *Metrics
	}{{"nil", nil}, {"metrics", NewMetrics()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.m.countForwarded("/runtime.v1.ImageService/ImageStatus", codes.OK)
			}
		})
	}
}

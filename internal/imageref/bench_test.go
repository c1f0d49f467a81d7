package imageref

import (
	"testing"

	"github.com/distribution/reference"
)

// benchInputs are typical pod image strings.
var benchInputs = []string{
	"nginx",
	"nginx:1.27",
	"myorg/app:v1.2.3",
	"registry.k8s.io/pause:3.10",
	"quay.io/prometheus/node-exporter:v1.8.2",
	"us-docker.pkg.dev/project/repo/image@" + d256,
	"localhost:5000/dev/app:latest@" + d256,
	"docker.io/library/busybox:1.36",
}

var (
	benchString string
	benchBool   bool
)

func BenchmarkTrimTagDigest(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchString, benchBool = TrimTagDigest(benchInputs[i%len(benchInputs)])
	}
}

func BenchmarkUpstreamTrimTagDigest(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchString, benchBool = upstreamTrim(benchInputs[i%len(benchInputs)])
	}
}

func BenchmarkValid(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchBool = Valid(benchInputs[i%len(benchInputs)])
	}
}

func BenchmarkUpstreamValid(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchBool = upstreamValid(benchInputs[i%len(benchInputs)])
	}
}

func BenchmarkNormalizedName(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchString, benchBool = NormalizedName(benchInputs[i%len(benchInputs)])
	}
}

func BenchmarkUpstreamNormalizedName(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		named, err := reference.ParseNormalizedNamed(benchInputs[i%len(benchInputs)])
		if err == nil {
			benchString = named.Name()
		}
	}
}

func BenchmarkFamiliarName(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchString, benchBool = FamiliarName(benchInputs[i%len(benchInputs)])
	}
}

func BenchmarkUpstreamFamiliarName(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		named, err := reference.ParseNormalizedNamed(benchInputs[i%len(benchInputs)])
		if err == nil {
			benchString = reference.FamiliarName(named)
		}
	}
}

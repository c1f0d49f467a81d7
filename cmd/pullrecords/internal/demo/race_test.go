//go:build race

package demo

// raceEnabled: the race detector slows the demo several times over.
const raceEnabled = true

//go:build race

package memstore

// raceEnabled lets slow tests use less data under the race detector, which
// makes them several times slower without changing what they measure.
const raceEnabled = true

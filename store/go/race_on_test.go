//go:build race

package claimstore_test

// The race detector makes sync.Pool drop items at random: allocation
// counts are not asserted under it.
const raceEnabled = true

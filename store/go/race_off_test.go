//go:build !race

package claimstore_test

const raceEnabled = false

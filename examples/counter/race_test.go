//go:build race

package main

// raceEnabled makes the process tests build the binary with -race too.
const raceEnabled = true

//go:build race

package gateway

// raceEnabled: the race detector slows the gateway several times over, so
// tests whose outcome is a latency figure check it only without it.
const raceEnabled = true

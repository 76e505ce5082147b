// Package hotpath holds the end-to-end benchmarks of corput's proxy path
// that the peer comparison (bench/peers, docs/performance.md) is optimised against: a
// real gateway on loopback in front of minimal raw-TCP origins that
// allocate nothing, driven by minimal raw-TCP keep-alive clients, so that
// allocs/op is the gateway's own cost per proxied request and a CPU profile
// shows the gateway, not the test's origin or client.
//
//	go test -run '^$' -bench . -benchmem -cpuprofile cpu.prof ./bench/hotpath
//
// make bench-hotpath does the same. The figures and every optimisation
// they drove are in docs/performance.md.
package hotpath

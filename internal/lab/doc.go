// Package lab is corput's laboratory: it measures, on virtual time, what
// each upstream technique does to connections, churn and tail latency, and
// writes the figures as tables, plots and a report (docs/lab.md). It answers
// what docs/spec.md asks to be shown rather than asserted: the churn of each
// connection-pool technique added one at a time (gw-04), the tail under the
// payment cluster's 70/30 workload and a cold endpoint's load in its first
// 30 s (LB-PAY-001's MC-WM-01 and MC-BN-01), and Zuul's results.
//
// # The simulator drives the real code
//
// A simulation is a discrete-event run on a clock.Fake, which is the event
// queue: every arrival, dial, service completion and timeout is an AfterFunc
// on it, and the run advances it second by second. Randomness comes from
// seeded rng sources, so a seed fixes every figure. Nothing is modelled twice:
//
//   - subsets come from the real subset.Placement of each algorithm, changed
//     by the same Add/Remove deltas discovery applies, and loops learn their
//     changes through subset.Diff;
//   - every connection is held by a real pool.Pool (one per (endpoint, loop),
//     or per endpoint for the shared-pool step) over pool/memconn
//     connections whose Streams() is 1 (HTTP/1.1) or 100 (HTTP/2) and whose
//     dial latency stands for a TCP + TLS handshake; pools are reached with
//     AcquireAsync, which never blocks;
//   - every pick is a real balance.Picker of a per-gateway balance.Origin,
//     with TryAdmit/Release around the acquisition and Done with the
//     measured latency and outcome, exactly as the gateway's proxy does it;
//   - every request is driven by the gateway's own request driver
//     (package dispatch): placed on a loop, its picker's warm rule, a
//     stream borrowed from the endpoint's home loop or acquired from the
//     loop's pool, and each attempt's step decided by package forward's
//     Attempt. Only the arrivals and the origins are simulated (gateway.go
//     keeps the pools a scope stores, and the modelled origin's exchange).
//
// Connections created and closed are counted by a pool.Tally observer shared
// by a run's pools and sampled once per virtual second; the open count is
// created − closed, cross-checked against the origins' own count of open
// connections (memconn.Dialer.Stats).
//
// What is modelled is only the origin: an instance has a finite number of
// workers and a FIFO queue; a request of a workload class holds a worker for
// the class's service time × the instance's slowdown (5 for the degraded
// endpoint) × its warm-up factor (workload.Warmup.At, the same curve the real
// test origin uses), and is answered 500 with the instance's injected error
// rate. Arrivals are Poisson.
//
// # Experiments
//
//   - steps: the first seed's steps 0–5 on a fleet of gateways × loops ×
//     endpoints, with a rolling origin deploy and an origin autoscale in the
//     timeline: open connections and connections created per second;
//   - herd: a gateway fleet deploy that starts with empty pools, with and
//     without pre-warm, reconnect jitter and a traffic ramp;
//   - subsets: subset.Compare over every algorithm (coverage and churn);
//   - lb: every balancing policy on a degraded, a cold and a flaky endpoint:
//     latency percentiles per class, per-endpoint shares, the cold endpoint's
//     concurrency over its first 30 s, with and without slow start;
//   - resilience: the capacity a loop keeps when f endpoints fail, for
//     several subset sizes.
//
// Every latency figure is a set of percentiles (p50, p90, p99, max), never an
// average alone, and a workload without cost skew is refused with
// ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED (workload.Mix.Validate).
// docs/lab.md explains how to read each table and plot.
package lab

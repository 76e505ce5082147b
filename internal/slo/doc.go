// Package slo watches an origin's traffic by workload class and acts on it:
// the SLO guard (a class whose rolling p99 stays over its budget gets its
// worst zone down-weighted and low-priority routes shed: seed 002's
// MC-BG-01, per class) and the workload-mix monitor (a heavy share above
// 45 % for 30 s signals the autoscaler: MC-WM-01).
//
//   - Window is a rolling latency histogram with log-linear buckets (64
//     sub-buckets per power of two): its p50/p90/p99 are within 1 % of the
//     exact nearest-rank quantiles between 10 ms and 1 s (the contract
//     histogram's buckets, …, 100, 250, 500 ms, cannot be read that
//     finely). Recording is two atomic adds, without lock or allocation.
//   - Monitor keeps, per class, a Window over the last minute and, per
//     second, the class mix. Once a second (on its clock) it decides:
//     a class whose p99 has been over its budget for EnterAfter guards
//     the origin: the zone with the worst latency is down-weighted
//     through the balancer, and routes of priority low are shed
//     (forward.SLOShed); the guard leaves once the p99 has been under
//     0.8 × the budget for LeaveAfter. The mix monitor raises the
//     scale-out signal once the heavy share has been above its threshold
//     in every second of ScaleOut.For.
//   - Notifier posts scale-out events to a webhook through a bounded queue
//     with retries and backoff; a full queue drops the event and counts
//     it, so routing never waits on it.
package slo

// Package discovery owns where an origin's membership comes from and how
// often a change of it reaches the gateway: the static, watched-file and
// xDS EDS sources, the per-origin debounce in front of the subset ring, and
// this gateway's position in its fleet.
//
// It implements the first seed's extension "control-plane-driven membership
// (EDS) with debounced re-subsetting so rapid pod churn doesn't thrash the
// ring", and the feed behind Zuul's ring that "manages it with incremental
// deltas thereafter" (Zuul, docs/spec.md): a Source emits the FULL membership of an
// origin every time it changes; the consumer (the gateway, through the
// subset ring's Sync) turns consecutive full sets into deltas, so indices on
// the ring stay stable and only the subsets that changed touch their pools.
//
// Invariants:
//   - An Update always carries the complete, valid membership of one origin,
//     sorted by address, with no duplicate addresses and every weight ≥ 1.
//     Unhealthy xDS endpoints are left out rather than flagged.
//   - An Update's shared ring indices (ring.go: EDS metadata
//     filter_metadata["corput"].ring_index, or ring_index: in a file) are
//     on every endpoint or on none, dense 0..N-1 and unique, with one
//     ring_subsets power of two if any (CheckRing). A source refuses an
//     update that breaks this as it refuses any invalid one.
//   - A source never replaces good membership with bad: an invalid file, a
//     rejected (NACKed) xDS response or a control plane that is down leaves
//     the last good membership in force; Err says why, the log says it once.
//   - A source calls emit from one goroutine at a time and never after Run
//     has returned.
//   - The Debouncer applies at most one update per origin per window (after
//     the first, which applies at once), always the latest offered, never
//     one equal to the membership last applied, and never later than
//     MaxWait after the first unapplied change.
//   - An xDS client over TLS (XDSConfig.TLS) verifies the server's
//     certificate against its CA bundle and name, and reads its files
//     again for every connection (internal/tlsfiles): a rotation is used
//     from the next connection on, and the stream that is up keeps going.
//   - Time comes from an injected clock.Clock and jitter from a seeded
//     rng.Source, so tests run on clock.Fake without sleeping.
//
// docs/discovery.md describes the sources, the file format, the debounce
// semantics, fleet position and an example xDS setup.
package discovery

// Package controlplane is `corput control-plane`: an xDS server (ADS over
// gRPC, EDS only) that gives every gateway of a fleet the same ring. For
// each origin it keeps one dense index assignment with subset.Ring — the
// initial set shuffled as Zuul does, a joining endpoint at the next index,
// a leaving one's hole filled by the highest — and sends each endpoint's
// index and the origin's subset count in its LbEndpoint metadata
// (MetadataNamespace, KeyRingIndex, KeyRingSubsets; docs/discovery.md),
// so that gateways placing endpoints by them agree whatever their
// histories.
//
// The membership comes from a watched source file (ParseSource), from an
// upstream ADS server relayed with corput's own xDS client
// (discovery.XDS), or — for a read-only follower — from the state file a
// writer persists. docs/control-plane.md describes the flags, the file
// formats, replicas and failure modes.
//
// Invariants:
//   - One writer owns the state file (an exclusive flock beside it). It
//     persists a change before it publishes it, so no index a gateway has
//     seen is lost by a crash; WriteState replaces the file atomically
//     (temporary file, fsync, rename, directory fsync).
//   - A restart places every ring at its persisted indices and subset
//     count (Ring.Place): it changes no index, and an origin's version
//     continues. A damaged state file is refused, never written over.
//   - Rings are sized for an unbounded fleet: the subset count sent is the
//     hysteresis's value for N alone; each gateway caps it by its own F.
//   - Changes are debounced (trailing edge, capped at five windows; an
//     origin's first membership at once) and published as one cache
//     update holding only the origins whose assignment changed; the
//     linear cache sends a stream only the clusters it has not got.
//   - A NACK is logged and counted; the rejected version is not resent to
//     that stream.
package controlplane

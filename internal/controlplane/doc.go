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
// The writer also assigns gateways dense fleet positions by node id: a
// second resource type, discovery.FleetType (a Struct {instance, size}
// named by the node id), served from its own LinearCache beside the EDS
// one through a MuxCache (fleet.go).
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
//   - Fleet positions are dense: the node at instance i is the state's
//     Fleet[i], each node once, and the size served is len(Fleet). A node
//     joins at the end with its first fleet subscription, keeps its
//     position while it has a fleet stream and for the grace after its
//     last one closed, and only the grace's expiry releases it: the
//     highest moves into the hole, so one gateway moves. A join or release
//     is persisted at once, then published as one cache update of every
//     node whose position changed; a failed write publishes nothing and is
//     tried again. A restart serves the persisted positions and gives each
//     node a fresh grace. Only the writer assigns; a follower serves none.
//   - Over TLS (Options.TLS) the listener's certificate, key and client
//     CA bundle are read again at every handshake (internal/tlsfiles): a
//     rotation needs no restart and cuts no stream. With a client CA, a
//     client without a certificate it verifies is refused at the
//     handshake, counted and logged. With FleetIdentity, a fleet
//     subscription whose node id is not a DNS or URI SAN of the stream's
//     verified client certificate ends its stream (PermissionDenied),
//     counted and logged, and joins, holds or takes no position.
package controlplane

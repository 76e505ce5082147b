// Package subset decides which few endpoints of an origin each loop of each
// gateway talks to, so that every loop keeps a small, balanced, stable set of
// upstream connections (docs/spec.md: gw-04's "Balanced subset" and "Stable subset", and
// Zuul's event-loop-level subsetting; Ward, Wankadia, Guliani,
// "Reinventing Backend Subsetting at Google", ACM Queue 20(5), 2022).
//
// # Ringsteady
//
// A Ring holds one origin's endpoints under dense, stable integer indices
// 0..N-1. Index i sits at ring position VdC(i), the binary Van der Corput
// value of i (its bits mirrored behind the binary point), so every prefix of
// the indices is spread almost evenly around the ring. The ring is cut into S
// equal arcs, S a power of two; subset j is the arc [j/S, (j+1)/S). Because
// the low log2(S) bits of i decide its arc, subset j holds exactly the indices
// congruent to one residue mod S, and any N dense indices fill the S subsets
// with sizes that differ by at most one.
//
// The initial order is the sorted endpoint list shuffled by a generator seeded
// from the origin's name, so every gateway computes the same ring without
// talking to the others. After that the ring changes only by deltas: a new
// endpoint takes the lowest free index (N); a removed endpoint's hole is
// filled by the endpoint holding the highest index. One add or remove
// therefore touches at most two subsets and moves at most one surviving
// endpoint.
//
// # Subset count
//
// Sizing picks S so that N/S falls in an ideal range (default 25–50, the Zuul
// figure) and keeps S while N/S stays inside that range widened by a slack
// (default 20 %), so membership that oscillates around a boundary does not
// reshuffle. Doubling S splits every subset in two; halving merges pairs.
//
// # Frontends
//
// A frontend is loop l of gateway g in a fleet of G gateways with K loops.
// Frontend number f = g·K + l uses the subset whose residue is f mod S. Every
// subset is therefore used by F/S frontends (±1, F = G·K), a gateway with
// K ≥ S uses every subset, and adding a gateway leaves every existing
// frontend's subset alone.
//
// # Snapshots
//
// The owner of a Ring (discovery, one goroutine) publishes immutable
// Snapshots; the request path reads a loop's members from a Snapshot in O(1)
// without allocating. Diff tells which loops' subsets changed between two
// snapshots.
//
// # Comparators and metrics
//
// Algorithm is implemented by ringsteady and by the alternatives the seeds ask
// us to rank: hashmod, random, rendezvous (gRPC A68) and sre (SRE book ch. 20
// deterministic subsetting), plus none (every endpoint, unranked). Each
// Placement publishes the same kind of Snapshot, so a gateway serves any of
// them alike. Compare measures their fleet coverage balance and their churn
// for membership, fleet and subset-count changes; `corput subsets` prints the
// result. docs/subsetting.md explains the algorithm, sizing and ranking.
package subset

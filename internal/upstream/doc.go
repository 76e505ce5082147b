// Package upstream is corput's wire layer: it opens connections to origin
// endpoints and carries requests over them. It implements the pool's
// contract (pool.Conn, pool.Dialer in internal/pool/conn.go) for real
// sockets; the pool decides when a connection is handed out, probed,
// recycled or closed, and this package never keeps connections of its own.
//
// Two connection types share one interface, Conn (pool.Conn + RoundTrip):
//
//   - HTTP/1.1 (h1Conn): net/http's Request.Write and http.ReadResponse over
//     a bufio reader and writer. One request at a time (Streams() == 1). A
//     connection goes back to idle only when the response body was read to
//     EOF (or a small rest already in the buffer was drained on Close) and
//     neither side asked for "Connection: close"; anything else closes it.
//     101 Switching Protocols hands the raw connection to the caller.
//   - HTTP/2 (h2Conn): corput's own client, package h2. Streams() is the
//     peer's SETTINGS_MAX_CONCURRENT_STREAMS, Usable() turns false on GOAWAY
//     or a broken socket, Ping is an HTTP/2 PING with a timeout. The fast
//     path opens streams on it itself (Mux); net/http's path uses RoundTrip.
//
// Invariants:
//   - Usable, Streams and Protocol never block and never allocate: the pool
//     calls them on its hot path, under its per-loop lock. HTTP/2 state is
//     therefore read from atomics the connection's read loop keeps. An idle HTTP/1.1 connection is checked with one non-blocking
//     read on the socket (under TLS too), so a peer that closed it is found
//     before it is handed out, without a goroutine per idle connection.
//   - A Conn that reported !Usable() never becomes usable again.
//   - Errors carry the endpoint address; dial failures are *DialError with a
//     Kind (refused, timeout, tls, protocol, network); IsConnectFailure and
//     IsRefusedStream tell the gateway which failures are safe to retry.
//
// The Dialer picks the protocol per endpoint: "auto" offers ALPN
// h2,http/1.1 over TLS and follows the origin's choice (plain HTTP/1.1 when
// no TLS is configured), "h1" and "h2" force one, "h2c" speaks cleartext
// HTTP/2 with prior knowledge. TLS verification is on unless
// insecure_skip_verify is set; a client certificate makes it mTLS.
//
// Spec: docs/spec.md, gw-04 ("Required behaviors": reuse by default, keepalive so a dead
// origin is not handed out; "Per-origin protocol negotiation (ALPN)"),
// docs/pool.md ("The wire").
package upstream

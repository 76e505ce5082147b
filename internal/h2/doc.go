// Package h2 is corput's HTTP/2 client connection (RFC 9113): the wire
// under an HTTP/2 upstream pool's connections, for both of the gateway's
// paths. The fast path opens a stream with the request's fields straight
// from its parsed HTTP/1.1 head and relays the response from the stream;
// net/http's path goes through RoundTrip.
//
// It exists for CPU per request (docs/decisions.md, "corput's own HTTP/2
// client"). x/net/http2's ClientConn,
// which it replaces, starts a goroutine per request, flushes each
// request's HEADERS frame on its own and hands every response over
// through three goroutines. Here:
//
//   - A connection has one goroutine, its read loop. A stream has none: the
//     goroutine that opened it waits on the stream's wake channel, and the
//     read loop wakes it once for all the frames it read in one go (a small
//     response's HEADERS and DATA are one wake-up).
//   - Writers share one buffered writer under a mutex. A writer that sees
//     another waiting for the mutex leaves the flush to it, and a request's
//     HEADERS, when other streams are open on the connection, are flushed
//     after a yield to the goroutines ready to run, so the HEADERS of
//     concurrent requests leave in one write (one TLS record); a stream
//     alone on its connection flushes at once.
//   - Request header blocks are encoded without HPACK's dynamic table and
//     without Huffman coding: names from the static table where they are
//     in it, everything else literal, no allocation and nothing kept (the
//     caller's bytes may be reused at once). Responses are decoded by
//     x/net/http2/hpack with the table the origin chooses.
//   - Streams are recycled (Release), with their field and body buffers.
//
// Invariants:
//   - Lock order: Conn.wmu (the writer) before Conn.mu (streams, windows).
//     The read loop never holds mu while it writes.
//   - Stream IDs go on the wire in increasing order: an ID is taken and its
//     HEADERS written under wmu, and the stream is in the map before its
//     HEADERS can be answered.
//   - Flow control both ways: DATA is sent within the peer's connection and
//     stream windows; received DATA is credited back (WINDOW_UPDATE) only
//     as the stream's reader consumes it, so a slow reader holds at most
//     one stream window of buffered body.
//   - Usable, Streams and Ping never block on the connection's I/O; Usable
//     and Streams read atomics.
//   - Once the connection fails (a read or write error, a protocol error,
//     Close) every stream not yet ended fails with that error and no new
//     stream opens; after GOAWAY, streams above its last ID fail as refused
//     (nothing processed, safe to retry) and no new stream opens.
//   - Every wait (window, response head, body) also ends on the caller's
//     done channel: a timeout or a client that left never hangs a request.
package h2

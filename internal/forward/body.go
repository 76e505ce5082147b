package forward

import (
	"io"
	"sync"
)

// buffers are the bodies' copy buffers, shared by both serving paths.
var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Buffer lends a copy buffer; give it back with PutBuffer.
func Buffer() *[]byte { return buffers.Get().(*[]byte) }

// PutBuffer gives a buffer from Buffer back.
func PutBuffer(b *[]byte) { buffers.Put(b) }

// Copy copies src to dst through a pooled buffer, calling flush (when not
// nil) after every write: a streaming response (SSE, gRPC, chunked) is
// never held back.
func Copy(dst io.Writer, src io.Reader, flush func() error) (int64, error) {
	bp := Buffer()
	defer PutBuffer(bp)
	var n int64
	for {
		nr, rerr := src.Read(*bp)
		if nr > 0 {
			nw, werr := dst.Write((*bp)[:nr])
			n += int64(nw)
			if werr != nil {
				return n, werr
			}
			if flush != nil {
				if ferr := flush(); ferr != nil {
					return n, ferr
				}
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

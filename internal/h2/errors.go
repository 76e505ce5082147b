package h2

import (
	"errors"
	"fmt"
)

// ErrCode is an HTTP/2 error code (RFC 9113 §7).
type ErrCode uint32

// The error codes corput sends or looks at.
const (
	CodeNo                 ErrCode = 0x0
	CodeProtocol           ErrCode = 0x1
	CodeInternal           ErrCode = 0x2
	CodeFlowControl        ErrCode = 0x3
	CodeStreamClosed       ErrCode = 0x5
	CodeFrameSize          ErrCode = 0x6
	CodeRefusedStream      ErrCode = 0x7
	CodeCancel             ErrCode = 0x8
	CodeCompression        ErrCode = 0x9
	CodeEnhanceYourCalm    ErrCode = 0xb
	CodeInadequateSecurity ErrCode = 0xc
)

var codeNames = map[ErrCode]string{
	CodeNo: "NO_ERROR", CodeProtocol: "PROTOCOL_ERROR", CodeInternal: "INTERNAL_ERROR",
	CodeFlowControl: "FLOW_CONTROL_ERROR", 0x4: "SETTINGS_TIMEOUT", CodeStreamClosed: "STREAM_CLOSED",
	CodeFrameSize: "FRAME_SIZE_ERROR", CodeRefusedStream: "REFUSED_STREAM", CodeCancel: "CANCEL",
	CodeCompression: "COMPRESSION_ERROR", 0xa: "CONNECT_ERROR", CodeEnhanceYourCalm: "ENHANCE_YOUR_CALM",
	CodeInadequateSecurity: "INADEQUATE_SECURITY", 0xd: "HTTP_1_1_REQUIRED",
}

func (c ErrCode) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("error code 0x%x", uint32(c))
}

// StreamError is a stream the origin reset (RST_STREAM), or one this side
// reset for the reason given.
type StreamError struct {
	Code   ErrCode
	Remote bool // the origin sent it
}

func (e *StreamError) Error() string {
	if e.Remote {
		return "stream reset by the origin: " + e.Code.String()
	}
	return "stream reset: " + e.Code.String()
}

// ConnError is the failure that ended the connection.
type ConnError struct {
	Code ErrCode // the GOAWAY code sent or received; CodeNo for an I/O error
	Err  error   // what happened
}

func (e *ConnError) Error() string {
	if e.Code == CodeNo {
		return "HTTP/2 connection: " + e.Err.Error()
	}
	return fmt.Sprintf("HTTP/2 connection (%v): %v", e.Code, e.Err)
}

func (e *ConnError) Unwrap() error { return e.Err }

var (
	// ErrUnusable is returned by Open on a connection that failed, was
	// closed or told to go away: nothing was sent.
	ErrUnusable = errors.New("HTTP/2 connection not usable (closed, broken or GOAWAY); nothing was sent")
	// ErrRefused fails a stream the origin did not process: above a
	// GOAWAY's last stream ID, or reset with REFUSED_STREAM.
	ErrRefused = errors.New("stream refused by the origin; it was not processed")
	// ErrHeadTooLarge fails a stream whose response header list is above
	// Options.MaxHeaderListSize.
	ErrHeadTooLarge = errors.New("response header list larger than the limit")
	// ErrCanceled fails a stream its caller closed.
	ErrCanceled = errors.New("stream canceled")
	// ErrDone is what a wait returns when the caller's done channel fired.
	ErrDone = errors.New("wait ended by the caller")
	// ErrClosed is the error of a connection closed by Close.
	ErrClosed = errors.New("connection closed")
)

// IsRefused reports whether err says the origin did not process the
// request: nothing was sent, the stream was above a GOAWAY's last stream
// ID, or it was reset with REFUSED_STREAM.
func IsRefused(err error) bool {
	if errors.Is(err, ErrUnusable) || errors.Is(err, ErrRefused) {
		return true
	}
	var se *StreamError
	return errors.As(err, &se) && se.Code == CodeRefusedStream
}

// Package proxyproto reads the PROXY protocol header (HAProxy's, versions 1
// and 2) a layer-4 load balancer puts before a connection's first byte, so
// that the client's address, not the balancer's, is the connection's
// remote address everywhere above: X-Forwarded-For, the access log,
// source_ip hashing, rate limits and address rules.
//
// A Listener wraps the downstream listener. Each connection it accepts is
// judged by its real peer address against the policy in force (read at
// every accept, so a reload changes it in place):
//
//   - from a trusted source (Policy.From), the connection must start with a
//     PROXY header; it is read in the connection's own goroutine (never in
//     the accept loop), within Policy.Timeout, and its address becomes the
//     connection's RemoteAddr. A missing, malformed, oversized or late
//     header closes the connection.
//   - from anyone else, the connection is closed at once (Other: refuse)
//     or served as it is, its bytes unread (Other: plain).
//
// Invariants:
//   - The header is read exactly: no byte after it is consumed, so the
//     socket can be read raw afterwards (package sockio) and TLS or HTTP
//     starts at the right byte. A v1 header is read byte by byte after
//     its fixed prefix; a v2 header by its length.
//   - A header is bounded: v1 at 107 bytes (the specification's), v2 at
//     MaxV2 bytes in all; anything longer is refused, never buffered.
//   - A LOCAL (v2) or UNKNOWN (v1) header, and a v2 header for a family
//     other than TCP over IPv4 or IPv6, keeps the real peer address (the
//     balancer's own health checks send these).
//   - Conn.ReadHeader runs once; RemoteAddr and Read call it first, so a
//     server that knows nothing of this package still sees the client's
//     address and never the header's bytes. SyscallConn does not: a raw
//     reader (the fast path) calls ReadHeader itself before its first read.
package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// MaxV1 is the longest v1 header, CRLF included (the specification's).
const MaxV1 = 107

// MaxV2 is the longest v2 header accepted, its 16-byte prefix included:
// room for the addresses and the TLVs balancers send (AWS's VPC endpoint
// ID, GCP's connection ID, SSL details), far from the format's 64 KiB.
const MaxV2 = 4096

var (
	sigV1 = []byte("PROXY ")
	sigV2 = []byte("\r\n\r\n\x00\r\nQUIT\n")
)

// Errors of a header that is refused.
var (
	ErrNoHeader  = errors.New("proxyproto: no PROXY header")
	ErrMalformed = errors.New("proxyproto: malformed PROXY header")
	ErrTooLong   = errors.New("proxyproto: PROXY header too long")
)

// Header is what a PROXY header says.
type Header struct {
	Version int            // 1 or 2
	Local   bool           // LOCAL, UNKNOWN or an unsupported family: keep the real peer
	Source  netip.AddrPort // the client's address, when !Local
	Dest    netip.AddrPort // the address the client connected to, when !Local
}

// Read reads one PROXY header from r, exactly: it never reads a byte past
// the header's end.
func Read(r io.Reader) (Header, error) {
	var pre [16]byte
	if _, err := io.ReadFull(r, pre[:len(sigV1)]); err != nil {
		return Header{}, noHeader(err)
	}
	if bytes.Equal(pre[:len(sigV1)], sigV1) {
		return readV1(r, pre[:len(sigV1)])
	}
	if !bytes.Equal(pre[:len(sigV1)], sigV2[:len(sigV1)]) {
		return Header{}, ErrNoHeader
	}
	if _, err := io.ReadFull(r, pre[len(sigV1):]); err != nil {
		return Header{}, noHeader(err)
	}
	if !bytes.Equal(pre[:12], sigV2) {
		return Header{}, ErrNoHeader
	}
	return readV2(r, pre)
}

// noHeader is a short read's error: a connection that ended or timed out
// before a header.
func noHeader(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrNoHeader
	}
	return err
}

// readV1 reads the rest of a v1 header ("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n")
// after its prefix, byte by byte up to its CRLF.
func readV1(r io.Reader, prefix []byte) (Header, error) {
	var buf [MaxV1]byte
	n := copy(buf[:], prefix)
	for {
		if n == len(buf) {
			return Header{}, ErrTooLong
		}
		if _, err := io.ReadFull(r, buf[n:n+1]); err != nil {
			return Header{}, malformed(err)
		}
		n++
		if buf[n-1] == '\n' {
			break
		}
	}
	return ParseV1(buf[:n])
}

// ParseV1 parses a complete v1 header line, CRLF included.
func ParseV1(line []byte) (Header, error) {
	h := Header{Version: 1}
	if len(line) > MaxV1 {
		return h, ErrTooLong
	}
	if !bytes.HasPrefix(line, sigV1) || !bytes.HasSuffix(line, []byte("\r\n")) {
		return h, ErrMalformed
	}
	f := bytes.Split(line[len(sigV1):len(line)-2], []byte{' '})
	if string(f[0]) == "UNKNOWN" { // the rest of the line is ignored
		h.Local = true
		return h, nil
	}
	if len(f) != 5 {
		return h, ErrMalformed
	}
	var v6 bool
	switch string(f[0]) {
	case "TCP4":
	case "TCP6":
		v6 = true
	default:
		return h, ErrMalformed
	}
	src, err1 := addrV1(f[1], v6)
	dst, err2 := addrV1(f[2], v6)
	sp, err3 := portV1(f[3])
	dp, err4 := portV1(f[4])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return h, ErrMalformed
	}
	h.Source, h.Dest = netip.AddrPortFrom(src, sp), netip.AddrPortFrom(dst, dp)
	return h, nil
}

func addrV1(b []byte, v6 bool) (netip.Addr, error) {
	a, err := netip.ParseAddr(string(b))
	if err != nil || a.Zone() != "" || a.Is4() == v6 {
		return netip.Addr{}, ErrMalformed
	}
	return a, nil
}

// portV1 is a port in decimal, without a sign or leading zero.
func portV1(b []byte) (uint16, error) {
	if len(b) == 0 || len(b) > 5 || (b[0] == '0' && len(b) > 1) {
		return 0, ErrMalformed
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, ErrMalformed
		}
	}
	p, err := strconv.ParseUint(string(b), 10, 16)
	return uint16(p), err
}

// readV2 reads the rest of a v2 header after its 16-byte prefix.
func readV2(r io.Reader, pre [16]byte) (Header, error) {
	n := int(binary.BigEndian.Uint16(pre[14:16]))
	if 16+n > MaxV2 {
		return Header{}, ErrTooLong
	}
	buf := make([]byte, 16+n)
	copy(buf, pre[:])
	if _, err := io.ReadFull(r, buf[16:]); err != nil {
		return Header{}, malformed(err)
	}
	return ParseV2(buf)
}

// ParseV2 parses a complete v2 header, its prefix included.
func ParseV2(b []byte) (Header, error) {
	h := Header{Version: 2}
	if len(b) < 16 || !bytes.Equal(b[:12], sigV2) {
		return h, ErrMalformed
	}
	if len(b) > MaxV2 {
		return h, ErrTooLong
	}
	if b[12]>>4 != 2 {
		return h, ErrMalformed // version
	}
	n := int(binary.BigEndian.Uint16(b[14:16]))
	if len(b) != 16+n {
		return h, ErrMalformed
	}
	body := b[16:]
	switch b[12] & 0xf { // command
	case 0: // LOCAL: the balancer's own connection
		h.Local = true
		return h, nil
	case 1: // PROXY
	default:
		return h, ErrMalformed
	}
	fam, proto := b[13]>>4, b[13]&0xf
	if proto != 1 { // only STREAM (TCP) carries an address used here
		h.Local = true
		return h, nil
	}
	switch fam {
	case 1: // AF_INET
		if len(body) < 12 {
			return h, ErrMalformed
		}
		src := netip.AddrFrom4([4]byte(body[0:4]))
		dst := netip.AddrFrom4([4]byte(body[4:8]))
		h.Source = netip.AddrPortFrom(src, binary.BigEndian.Uint16(body[8:10]))
		h.Dest = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(body[10:12]))
	case 2: // AF_INET6
		if len(body) < 36 {
			return h, ErrMalformed
		}
		src := netip.AddrFrom16([16]byte(body[0:16])).Unmap()
		dst := netip.AddrFrom16([16]byte(body[16:32])).Unmap()
		h.Source = netip.AddrPortFrom(src, binary.BigEndian.Uint16(body[32:34]))
		h.Dest = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(body[34:36]))
	default: // AF_UNSPEC, AF_UNIX: no address of use
		h.Local = true
	}
	return h, nil
}

// malformed is a read's error inside a header that started.
func malformed(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrMalformed
	}
	return err
}

// AppendV1 appends h as a v1 header to dst (tests and tools send one).
func AppendV1(dst []byte, h Header) []byte {
	if h.Local || !h.Source.IsValid() {
		return append(dst, "PROXY UNKNOWN\r\n"...)
	}
	fam := "TCP4 "
	if h.Source.Addr().Is6() {
		fam = "TCP6 "
	}
	dst = append(append(dst, "PROXY "...), fam...)
	dst = append(h.Source.Addr().AppendTo(dst), ' ')
	dst = append(h.Dest.Addr().AppendTo(dst), ' ')
	dst = append(strconv.AppendUint(dst, uint64(h.Source.Port()), 10), ' ')
	dst = strconv.AppendUint(dst, uint64(h.Dest.Port()), 10)
	return append(dst, "\r\n"...)
}

// AppendV2 appends h as a v2 header to dst, with tlvs (raw TLV bytes)
// after the addresses.
func AppendV2(dst []byte, h Header, tlvs []byte) []byte {
	dst = append(dst, sigV2...)
	if h.Local || !h.Source.IsValid() {
		dst = append(dst, 0x20, 0x00)
		return binary.BigEndian.AppendUint16(dst, uint16(len(tlvs))) // LOCAL
	}
	var addrs []byte
	if h.Source.Addr().Is4() {
		dst = append(dst, 0x21, 0x11)
		s, d := h.Source.Addr().As4(), h.Dest.Addr().As4()
		addrs = append(append(addrs, s[:]...), d[:]...)
	} else {
		dst = append(dst, 0x21, 0x21)
		s, d := h.Source.Addr().As16(), h.Dest.Addr().As16()
		addrs = append(append(addrs, s[:]...), d[:]...)
	}
	addrs = binary.BigEndian.AppendUint16(addrs, h.Source.Port())
	addrs = binary.BigEndian.AppendUint16(addrs, h.Dest.Port())
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(addrs)+len(tlvs)))
	return append(append(dst, addrs...), tlvs...)
}

// Other is what a connection from outside Policy.From gets.
type Other uint8

// The choices of downstream.proxy_protocol.other.
const (
	Refuse Other = iota // closed at once
	Plain               // served without a header, its own address its client's
)

// Policy is the PROXY protocol policy of a listener.
type Policy struct {
	From    []netip.Prefix // the balancers: their connections carry a header
	Other   Other
	Timeout time.Duration // a header's time limit (downstream.read_header_timeout)
	// Count, when set, is called once per connection refused, with why:
	// "source" (outside From, Other: Refuse), "missing", "malformed",
	// "too_long" or "timeout".
	Count func(reason string)
}

// Trusted reports whether a connection from a must carry a header.
func (p *Policy) Trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, pr := range p.From {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

func (p *Policy) count(reason string) {
	if p.Count != nil {
		p.Count(reason)
	}
}

// Reasons lists the values Policy.Count is called with.
var Reasons = []string{"source", "missing", "malformed", "too_long", "timeout"}

// Listener applies the policy current returns (nil: none, every
// connection passes as it is) to the connections ln accepts.
type Listener struct {
	net.Listener
	current func() *Policy
}

// NewListener wraps ln.
func NewListener(ln net.Listener, current func() *Policy) *Listener {
	return &Listener{Listener: ln, current: current}
}

// Accept returns the next connection: as it is, or (from a trusted
// source) a *Conn whose header its first RemoteAddr or Read reads. A
// connection refused by its source is closed here, and Accept waits for
// the next.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p := l.current()
		if p == nil {
			return c, nil
		}
		peer := addrOf(c.RemoteAddr())
		if p.Trusted(peer) {
			return &Conn{Conn: c, policy: p}, nil
		}
		if p.Other == Plain {
			return c, nil
		}
		p.count("source")
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset: nothing of it was read
		}
		c.Close()
	}
}

// addrOf is a net.Addr's IP address (the zero Addr for none).
func addrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// Conn is a connection from a trusted balancer: its PROXY header is read
// once, before anything else is.
type Conn struct {
	net.Conn
	policy *Policy

	once   sync.Once
	err    error
	remote net.Addr // the header's source; nil: the real peer's
	header Header
}

// ReadHeader reads the connection's PROXY header, once, within the
// policy's time limit; it returns the error that refused it (the
// connection is then closed).
func (c *Conn) ReadHeader() error {
	c.once.Do(c.readHeader)
	return c.err
}

func (c *Conn) readHeader() {
	if c.policy.Timeout > 0 {
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.policy.Timeout)); err != nil {
			c.fail("malformed", err)
			return
		}
	}
	h, err := Read(c.Conn)
	if err != nil {
		reason := "malformed"
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			reason = "timeout"
		case errors.Is(err, ErrNoHeader):
			reason = "missing"
		case errors.Is(err, ErrTooLong):
			reason = "too_long"
		}
		c.fail(reason, err)
		return
	}
	if c.policy.Timeout > 0 {
		if err := c.Conn.SetReadDeadline(time.Time{}); err != nil {
			c.fail("malformed", err)
			return
		}
	}
	c.header = h
	if !h.Local {
		c.remote = net.TCPAddrFromAddrPort(h.Source)
	}
}

func (c *Conn) fail(reason string, err error) {
	c.policy.count(reason)
	c.err = err
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Conn.Close()
}

// Header is the connection's PROXY header (after ReadHeader).
func (c *Conn) Header() Header {
	c.ReadHeader()
	return c.header
}

// RemoteAddr is the client's address the header carries, or the real
// peer's for a LOCAL or UNKNOWN header (and for a refused one).
func (c *Conn) RemoteAddr() net.Addr {
	if c.ReadHeader() == nil && c.remote != nil {
		return c.remote
	}
	return c.Conn.RemoteAddr()
}

// Read reads after the header.
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.ReadHeader(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// SyscallConn gives the socket's raw access (package sockio). It does not
// read the header: a raw reader calls ReadHeader first.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("proxyproto: no raw access")
	}
	return sc.SyscallConn()
}

// CloseWrite half-closes the connection when the socket can.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

package forward

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/config"
)

// KeySource finds a request's key for a sticky origin (balancer.hash_on),
// on both serving paths, in place: it allocates nothing on the fast path's
// head. The zero KeySource finds no key.
type KeySource struct {
	kind config.HashKind
	name string // a header's (lower case) or a cookie's name
	// set: a request without the cookie gets one (balancer.cookie), with
	// these attributes.
	set    bool
	maxAge int64 // seconds; 0: a session cookie
	path   string
}

// NewKeySource is the key source hash_on describes; with cookie (nil:
// none) and hash_on "cookie NAME", a request without the cookie is given
// one (NewCookie).
func NewKeySource(h config.HashOn, cookie *config.StickyCookie) KeySource {
	ks := KeySource{kind: h.Kind, name: h.Name}
	if cookie != nil && h.Kind == config.HashCookie {
		ks.set, ks.maxAge, ks.path = true, int64(cookie.TTL/time.Second), cookie.Path
		if ks.path == "" {
			ks.path = "/"
		}
	}
	return ks
}

// cookieValueLen is the length of a cookie value NewCookie makes: 16 hex
// digits of a random 64-bit number.
const cookieValueLen = 16

// NewCookie makes the cookie of a request that has none, when the source
// sets one: a random value (16 hex digits), appended to dst as a
// Set-Cookie field value ("NAME=VALUE; Path=P; Max-Age=S; HttpOnly"),
// and the key of that value, which places the request as its later
// requests with the cookie will be. ok is false when the source sets no
// cookie. It allocates nothing once dst has room.
func (s KeySource) NewCookie(dst []byte) (field []byte, k balance.Key, ok bool) {
	if !s.set {
		return dst, balance.Key{}, false
	}
	dst = append(append(dst, s.name...), '=')
	at := len(dst)
	v := rand.Uint64()
	for i := 60; i >= 0; i -= 4 {
		dst = append(dst, "0123456789abcdef"[v>>uint(i)&0xf])
	}
	k = balance.KeyOf(dst[at : at+cookieValueLen])
	dst = append(append(dst, "; Path="...), s.path...)
	if s.maxAge > 0 {
		dst = strconv.AppendInt(append(dst, "; Max-Age="...), s.maxAge, 10)
	}
	return append(dst, "; HttpOnly"...), k, true
}

// Key is the key of a request with fields f from peer p: the header's
// first value, the cookie's value, or the client's address — from a
// trusted peer, the last address of its last X-Forwarded-For field (the
// one it appended: the address its own client connected from). A request
// without one (the field absent or empty) has the zero Key.
func (s KeySource) Key(f Prior, p Peer) balance.Key {
	switch s.kind {
	case config.HashHeader:
		v, _ := f.Value(s.name, 0)
		return balance.KeyOf(trimSpace(v))
	case config.HashCookie:
		for i := 0; ; i++ {
			v, ok := f.Value("cookie", i)
			if !ok {
				return balance.Key{}
			}
			if c, ok := cookieValue(v, s.name); ok {
				return balance.KeyOf(c)
			}
		}
	case config.HashSourceIP:
		if p.Trusted {
			if a := lastForwarded(f); len(a) > 0 {
				return balance.KeyOf(a)
			}
		}
		return balance.KeyOfString(p.IP)
	}
	return balance.Key{}
}

// cookieValue finds cookie name in a Cookie field's value ("a=1; b=2"),
// its value without optional quotes.
func cookieValue(v []byte, name string) ([]byte, bool) {
	for len(v) > 0 {
		var pair []byte
		if i := bytes.IndexByte(v, ';'); i >= 0 {
			pair, v = v[:i], v[i+1:]
		} else {
			pair, v = v, nil
		}
		pair = trimSpace(pair)
		eq := bytes.IndexByte(pair, '=')
		if eq < 0 || string(pair[:eq]) != name {
			continue
		}
		val := pair[eq+1:]
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		return val, true
	}
	return nil, false
}

// lastForwarded is the last non-empty address of the last X-Forwarded-For
// field, or nil.
func lastForwarded(f Prior) []byte {
	var last []byte
	for i := 0; ; i++ {
		v, ok := f.Value("x-forwarded-for", i)
		if !ok {
			break
		}
		last = v
	}
	for len(last) > 0 {
		i := bytes.LastIndexByte(last, ',')
		if a := trimSpace(last[i+1:]); len(a) > 0 {
			return a
		}
		if i < 0 {
			return nil
		}
		last = last[:i]
	}
	return nil
}

package edgetls

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Session tickets.
//
// A ticket is the session's state encrypted under a key the server holds;
// a client that presents it again skips the full handshake. crypto/tls's
// own keys are random per process (and rotated daily), so a ticket resumes
// only on the gateway that issued it. With session_ticket_keys every
// gateway of the fleet holds the same keys: the file's first key encrypts,
// every key decrypts.
//
// A rotation in place keeps the keys of the file it replaces for
// decryption (after the file's own), until the next change of the file: a
// file rewritten with a new key alone still resumes the tickets issued an
// instant before. To revoke a key at once, restart (or rotate twice).

// TicketKeySize is the size of a session ticket key.
const TicketKeySize = 32

// maxTicketKeys bounds a ticket key file (and the keys retained from the
// one before it): every decryption may try each.
const maxTicketKeys = 16

// maxTicketFileBytes bounds a ticket key file.
const maxTicketFileBytes = 64 << 10

// ReadTicketKeys reads a session ticket key file: one key a line, 32
// bytes in standard base64 (`openssl rand -base64 32`); blank lines and
// lines starting with # are skipped. No error quotes a key.
func ReadTicketKeys(file string) ([][TicketKeySize]byte, error) {
	data, err := readSmall(file, maxTicketFileBytes)
	if err != nil {
		return nil, err
	}
	var keys [][TicketKeySize]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(text)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s line %d is not base64; write one key a line, 32 random bytes in base64 (openssl rand -base64 32)", file, line)
		case len(raw) != TicketKeySize:
			return nil, fmt.Errorf("%s line %d holds %d bytes; a key is %d (openssl rand -base64 32)", file, line, len(raw), TicketKeySize)
		}
		k := [TicketKeySize]byte(raw)
		if i := slices.Index(keys, k); i >= 0 {
			return nil, fmt.Errorf("%s line %d repeats an earlier key; list each key once", file, line)
		}
		if keys = append(keys, k); len(keys) > maxTicketKeys {
			return nil, fmt.Errorf("%s holds more than %d keys; keep the one that encrypts and the few recent ones that still decrypt", file, maxTicketKeys)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no key; write one: openssl rand -base64 32 > %s", file, file)
	}
	return keys, nil
}

// checkTicketKeys reads the file for `corput check`.
func checkTicketKeys(f *findings, key, file string) [][TicketKeySize]byte {
	keys, err := ReadTicketKeys(file)
	if err != nil {
		f.errorf(key, "%v", err)
		return nil
	}
	if st, err := os.Stat(file); err == nil && st.Mode().Perm()&0o077 != 0 {
		f.warnf(key, "%s can be read by group or others (mode %04o); a ticket key decrypts the sessions it resumed: chmod 600 %s", file, st.Mode().Perm(), file)
	}
	return keys
}

// ticketer seals and opens the tickets of every handshake of a policy.
type ticketer struct {
	// keys are the file's, in its order (nil: crypto/tls's own random,
	// rotating keys); retained are the keys of the file before it that
	// it no longer lists, for decryption only.
	keys, retained [][TicketKeySize]byte
	// cfg holds the keys: its EncryptTicket and DecryptTicket are the
	// tickets' only cipher. It serves no handshake.
	cfg *tls.Config
}

// newTicketer is the ticketer of keys (nil: random), given the one in
// force before (nil at start). Keys that did not change keep the ticketer
// in force, random ones included, so that a reload of anything else leaves
// every ticket valid.
func newTicketer(keys [][TicketKeySize]byte, prev *ticketer) *ticketer {
	if prev != nil && slices.Equal(keys, prev.keys) {
		return prev
	}
	t := &ticketer{keys: keys, cfg: &tls.Config{}}
	if keys == nil {
		return t
	}
	if prev != nil {
		for _, k := range prev.keys {
			if !slices.Contains(keys, k) && len(t.retained) < maxTicketKeys {
				t.retained = append(t.retained, k)
			}
		}
	}
	all := make([][TicketKeySize]byte, 0, len(keys)+len(t.retained))
	t.cfg.SetSessionTicketKeys(append(append(all, keys...), t.retained...))
	return t
}

// bindingLabel starts the tag a ticket carries of the policy that issued
// it.
const bindingLabel = "corput edgetls client policy v1 "

// binding is the tag of a client-certificate policy: its mode and the
// certificates of its CA bundle. Gateways configured alike compute the
// same tag.
func binding(mode ClientAuth, cas [][]byte) []byte {
	h := sha256.New()
	h.Write([]byte(mode))
	for _, der := range cas {
		h.Write([]byte{0})
		h.Write(der)
	}
	return append([]byte(bindingLabel), h.Sum(nil)...)
}

// seal is a host config's WrapSession: the ticket records the
// client-certificate policy it was issued under.
func (t *ticketer) seal(tag []byte) func(tls.ConnectionState, *tls.SessionState) ([]byte, error) {
	return func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		ss.Extra = append(slices.DeleteFunc(ss.Extra, isBinding), tag)
		return t.cfg.EncryptTicket(cs, ss)
	}
}

// open is a host config's UnwrapSession. A ticket issued under another
// client-certificate policy (another host's, or the one before a reload
// changed client_auth or client_ca) is not resumed, so that the full
// handshake asks for the certificate as the policy in force does (see the
// package's invariants). Nothing resumed is a full handshake, never a
// failure.
func (t *ticketer) open(tag []byte) func([]byte, tls.ConnectionState) (*tls.SessionState, error) {
	return func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		ss, err := t.cfg.DecryptTicket(identity, cs)
		if err != nil || ss == nil {
			return nil, err
		}
		if !slices.ContainsFunc(ss.Extra, func(e []byte) bool { return bytes.Equal(e, tag) }) {
			return nil, nil
		}
		return ss, nil
	}
}

func isBinding(e []byte) bool { return bytes.HasPrefix(e, []byte(bindingLabel)) }

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

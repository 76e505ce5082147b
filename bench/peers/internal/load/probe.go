package load

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/results"
)

// ProbeTLS does one handshake with the proxy at addr as wrk does: OpenSSL
// (the library wrk links) with its default versions, suites and groups,
// the server name 127.0.0.1, no ALPN, no verification. wrk has no way to
// say what it negotiated, so `openssl s_client` does the same handshake
// and says.
func ProbeTLS(ctx context.Context, addr string) (results.TLSInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Its input is the null device: at its end s_client closes after the
	// handshake.
	argv := []string{"openssl", "s_client", "-connect", addr, "-servername", "127.0.0.1", "-brief"}
	out, err := command(ctx, argv...)
	if err != nil {
		return results.TLSInfo{}, err
	}
	t, err := ParseSClient(out)
	if err != nil {
		return t, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	t.Probe = "openssl s_client -brief, OpenSSL's defaults"
	if v, err := exec.CommandContext(ctx, "openssl", "version").Output(); err == nil {
		t.Library = opensslLibrary(string(v))
	}
	return t, nil
}

// opensslLibrary is the library version of `openssl version`'s "OpenSSL
// 3.0.19 27 Jan 2026 (Library: OpenSSL 3.0.19 27 Jan 2026)": the library
// is what wrk links.
func opensslLibrary(v string) string {
	v = strings.TrimSpace(v)
	if _, lib, ok := strings.Cut(v, "(Library: "); ok {
		return strings.TrimSuffix(lib, ")")
	}
	return v
}

// ParseSClient reads `openssl s_client -brief`'s report of a handshake:
//
//	Protocol version: TLSv1.3
//	Ciphersuite: TLS_AES_128_GCM_SHA256
//	Server Temp Key: X25519, 253 bits
func ParseSClient(out string) (results.TLSInfo, error) {
	var t results.TLSInfo
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Protocol version":
			t.Protocol = v
		case "Ciphersuite":
			t.Cipher = v
		case "Server Temp Key", "Negotiated TLS1.3 group":
			if t.Group == "" {
				t.Group = v
			}
		}
	}
	if t.Protocol == "" || t.Cipher == "" {
		return t, fmt.Errorf("no protocol version or cipher suite in its output (did the handshake fail?): %s", proc.LastLines(out, 5))
	}
	return t, nil
}

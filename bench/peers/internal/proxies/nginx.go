package proxies

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/results"
)

// Nginx is nginx; Fwd adds the X-Forwarded-* fields; Prior makes its
// listener h2c by prior knowledge (listen … http2: h2 only).
type Nginx struct{ Fwd, Prior bool }

func (Nginx) Name() string { return results.Nginx }
func (Nginx) Bin() string  { return "nginx" }
func (p Nginx) H2C() bool  { return p.Prior }

func (Nginx) launch(dir string) (string, []string) {
	path := filepath.Join(dir, "nginx.conf")
	return path, []string{"nginx", "-p", dir, "-c", path}
}

func (p Nginx) Files(dir, listen string, members []string, joining string, tc *certs.Files) ([]string, error) {
	return write(p, dir, nginxConfig(dir, listen, members, joining, p.Fwd, p.Prior, tc))
}

// nginxConfig: least_conn, 64 idle keep-alive connections per worker (or
// one per member when there are more: with 800 servers a cache of 64
// never holds the next server's connection, and every request dials),
// passive health (a refused connection takes a server out for 2 s and the
// request goes to the next one), and with fwd the X-Forwarded-For, -Proto
// and -Host fields corput sends; with tc, HTTPS on listen, TLS 1.3 only
// with TLS_AES_128_GCM_SHA256 only. nginx OSS has neither slow start nor
// a request queue. With h2c the listener speaks HTTP/2 by prior knowledge
// only (nginx 1.22: a cleartext listen … http2 takes no HTTP/1.1).
func nginxConfig(dir, listen string, members []string, joining string, fwd, h2c bool, tc *certs.Files) string {
	var b strings.Builder
	fmt.Fprintf(&b, `daemon off;
master_process on;
worker_processes auto;
user root;
pid %[1]s/nginx.pid;
error_log %[1]s/nginx-error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 1000000;
  upstream origins {
    least_conn;
`, dir)
	all := withJoining(members, joining)
	for _, m := range all {
		fmt.Fprintf(&b, "    server %s max_fails=1 fail_timeout=2s;\n", m)
	}
	fmt.Fprintf(&b, `    keepalive %d;
    keepalive_requests 1000000;
  }
  server {
    listen %s;
%s    location / {
      proxy_pass http://origins;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
%s      proxy_next_upstream error timeout;
      proxy_connect_timeout 1s;
      proxy_read_timeout 30s;
    }
  }
}
`, max(64, len(all)), nginxListen(listen, tc, h2c), nginxTLS(tc), nginxForwarded(fwd))
	return b.String()
}

// nginxListen is the listen directive's argument.
func nginxListen(listen string, tc *certs.Files, h2c bool) string {
	switch {
	case tc != nil:
		return listen + " ssl"
	case h2c:
		return listen + " http2"
	}
	return listen
}

// nginxTLS is the server's TLS lines: the certificate, TLS 1.3 only, and
// the one TLS 1.3 suite (ssl_ciphers sets TLS 1.2's; OpenSSL takes TLS
// 1.3's as Ciphersuites).
func nginxTLS(tc *certs.Files) string {
	if tc == nil {
		return ""
	}
	return fmt.Sprintf("    ssl_certificate %s;\n    ssl_certificate_key %s;\n    ssl_protocols TLSv1.3;\n    ssl_conf_command Ciphersuites %s;\n",
		tc.Cert, tc.Key, certs.Suite)
}

// nginxForwarded is the proxy_set_header lines that send what corput's
// Forwarding sends for a direct client: its address, the scheme and the
// Host it asked for.
func nginxForwarded(fwd bool) string {
	if !fwd {
		return ""
	}
	return "      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n" +
		"      proxy_set_header X-Forwarded-Proto $scheme;\n" +
		"      proxy_set_header X-Forwarded-Host $http_host;\n"
}

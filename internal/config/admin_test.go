package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseIn parses src as the file gateway.yaml in dir, with the files
// given (name → content) written beside it.
func parseIn(t *testing.T, src string, files map[string]string) (*Config, Diagnostics, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := Parse([]byte(src), filepath.Join(dir, "gateway.yaml"))
	ds, _ := err.(Diagnostics)
	if err != nil && ds == nil {
		t.Fatalf("Parse error %T: %v", err, err)
	}
	return cfg, ds, dir
}

// TestAdminForms: admin is read as the address alone (the original form)
// or as the block {listen, token_file}; a key the block leaves out keeps
// its default.
func TestAdminForms(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      Admin
	}{
		{"left out", "", Admin{Listen: "127.0.0.1:9901"}},
		{"string", "admin: 127.0.0.1:9911", Admin{Listen: "127.0.0.1:9911"}},
		{"empty value", "admin: ~", Admin{Listen: "127.0.0.1:9901"}},
		{"empty block", "admin: {}", Admin{Listen: "127.0.0.1:9901"}},
		{"block with listen", "admin: {listen: \"[::1]:9911\"}", Admin{Listen: "[::1]:9911"}},
		{"block on lines", "admin:\n  listen: 127.0.0.1:9911\n  token_file: tok", Admin{Listen: "127.0.0.1:9911", TokenFile: "tok"}},
		{"token only", "admin: {token_file: tok}", Admin{Listen: "127.0.0.1:9901", TokenFile: "tok"}},
		{"merge key", "admin: {<<: {listen: 127.0.0.1:9911}, token_file: tok}", Admin{Listen: "127.0.0.1:9911", TokenFile: "tok"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, ds, dir := parseIn(t, top(c.src), map[string]string{"tok": "a-token\n"})
			if ds != nil {
				t.Fatalf("diagnostics: %v", ds)
			}
			want := c.want
			if want.TokenFile != "" {
				want.TokenFile = filepath.Join(dir, want.TokenFile) // resolved against the config's directory
			}
			if cfg.Admin != want {
				t.Errorf("admin = %+v, want %+v", cfg.Admin, want)
			}
			if len(cfg.Warnings()) != 0 {
				t.Errorf("warnings: %v", cfg.Warnings())
			}
		})
	}
}

// TestAdminDiagnostics: the admin block decodes as strictly as the rest,
// and its token file must hold a token.
func TestAdminDiagnostics(t *testing.T) {
	type want struct {
		key  string
		text string
		line int
	}
	for _, c := range []struct {
		name  string
		src   string
		token string // the content of the file tok
		want  []want
	}{
		{"unknown key", "admin:\n  listen: 127.0.0.1:9901\n  tokenfile: tok", "", []want{{"admin.tokenfile", `unknown key "tokenfile" in admin; did you mean "token_file"?`, 3}}},
		{"duplicate key", "admin:\n  listen: 127.0.0.1:9901\n  listen: 127.0.0.1:9902", "", []want{{"admin.listen", "duplicate key (first set on line 2)", 3}}},
		{"a list", "admin: [127.0.0.1:9901]", "", []want{{"admin", "want host:port (admin: 127.0.0.1:9901) or a mapping with keys listen, token_file, got a list", 1}}},
		{"listen a list", "admin: {listen: [a]}", "", []want{{"admin.listen", "want a string, got a list", 1}}},
		{"bad address alone", "admin: 9901", "", []want{{"admin", `"9901" is not host:port`, 1}}},
		{"bad address in the block", "admin:\n  listen: 9901", "", []want{{"admin.listen", `"9901" is not host:port`, 2}}},
		{"same as listen in the block", "listen: 127.0.0.1:8080\nadmin: {listen: 127.0.0.1:8080}", "", []want{{"admin.listen", "is also the listen address", 2}}},
		{"missing token file", "admin:\n  token_file: nope", "", []want{{"admin.token_file", "cannot read", 2}}},
		{"empty token file", "admin:\n  token_file: tok", "", []want{{"admin.token_file", "is empty", 2}}},
		{"blank token file", "admin: {token_file: tok}", " \n\t\n", []want{{"admin.token_file", "is empty", 1}}},
		{"two words", "admin: {token_file: tok}", "secret1 secret2\n", []want{{"admin.token_file", "one word of visible ASCII", 1}}},
		{"control character", "admin: {token_file: tok}", "secret\x00", []want{{"admin.token_file", "one word of visible ASCII", 1}}},
		{"too large", "admin: {token_file: tok}", strings.Repeat("x", maxTokenBytes+1), []want{{"admin.token_file", "larger than 4096 bytes", 1}}},
		{"a directory", "admin: {token_file: .}", "", []want{{"admin.token_file", "not a regular file", 1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, ds, _ := parseIn(t, top(c.src), map[string]string{"tok": c.token})
			errs := ds.Errors()
			if len(errs) != len(c.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(c.want), ds)
			}
			for i, w := range c.want {
				d := errs[i]
				if d.Key != w.key || !strings.Contains(d.Message, w.text) || d.Line != w.line {
					t.Errorf("got %s (line %d)\nwant %s, line %d, containing %q", d, d.Line, w.key, w.line, w.text)
				}
				for _, secret := range []string{"secret1", "secret2", "secret"} {
					if strings.Contains(c.token, secret) && strings.Contains(d.String(), secret) {
						t.Errorf("the diagnostic quotes the token file's content: %s", d)
					}
				}
			}
		})
	}
}

// TestAdminWarning: an admin listener off loopback without a token file
// is accepted with a warning saying what is not served; with a token
// file, or on loopback, there is none.
func TestAdminWarning(t *testing.T) {
	for _, c := range []struct {
		src  string
		warn bool
	}{
		{"admin: 0.0.0.0:9901", true},
		{"admin: :9901", true},
		{"admin: {listen: \"[::]:9901\"}", true},
		{"admin: {listen: 10.0.0.7:9901}", true},
		{"admin: gateway.internal:9901", true},
		{"admin: {listen: 0.0.0.0:9901, token_file: tok}", false},
		{"admin: 127.0.0.1:9901", false},
		{"admin: 127.1.2.3:9901", false},
		{"admin: \"[::1]:9901\"", false},
		{"admin: localhost:9901", false},
		{"admin: {listen: localhost:9901, token_file: tok}", false},
	} {
		cfg, ds, _ := parseIn(t, top(c.src), map[string]string{"tok": "t0ken"})
		if ds != nil {
			t.Errorf("%s: %v", c.src, ds)
			continue
		}
		ws := cfg.Warnings()
		got := len(ws) == 1 && ws[0].Key == "admin.token_file" && ws[0].Line == 1 &&
			strings.Contains(ws[0].Message, "/admin/*, /debug/pprof/* and the dashboard answer 403")
		if got != c.warn || len(ws) > 1 {
			t.Errorf("%s: warnings %v, want the admin.token_file warning: %v", c.src, ws, c.warn)
		}
	}
}

func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	if err := os.WriteFile(file, []byte("\n  abc.DEF-123_~+/=  \r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := (Admin{TokenFile: file}).Token(); err != nil || tok != "abc.DEF-123_~+/=" {
		t.Errorf("Token() = %q, %v; want the trimmed content", tok, err)
	}
	if tok, err := (Admin{}).Token(); err != nil || tok != "" {
		t.Errorf("no token file: Token() = %q, %v; want \"\", nil", tok, err)
	}
}

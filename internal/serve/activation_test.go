package serve

import (
	"strings"
	"testing"
)

// env is a fake environment for activatedListeners.
type env map[string]string

func (e env) get(k string) string { return e[k] }
func (e env) unset(k string) error {
	delete(e, k)
	return nil
}

// TestActivationTakesOnlyItsOwnSockets: the variables are for the process
// LISTEN_PID names — another's (a parent's) are ignored — and they are
// cleared either way so that no child takes them; a count corput cannot
// use is an error that says what it takes. (Serving a handed-over socket
// is the gateway package's TestRollingRestartLosesNothing.)
func TestActivationTakesOnlyItsOwnSockets(t *testing.T) {
	for _, c := range []struct {
		name string
		env  env
		want string // "" for no error
	}{
		{"none", env{}, ""},
		{"another process's", env{"LISTEN_PID": "1", "LISTEN_FDS": "1"}, ""},
		{"three sockets", env{"LISTEN_PID": "42", "LISTEN_FDS": "3"}, "one or two sockets"},
		{"not a number", env{"LISTEN_PID": "42", "LISTEN_FDS": "x"}, "one or two sockets"},
	} {
		lns, err := activatedListeners(c.env.get, c.env.unset, 42)
		switch {
		case c.want == "" && err != nil, c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		case lns.Listen != nil || lns.Admin != nil:
			t.Errorf("%s: took sockets", c.name)
		}
		if len(c.env) != 0 {
			t.Errorf("%s: variables left for a child: %v", c.name, c.env)
		}
	}
}

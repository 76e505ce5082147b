// Package serve is the lifecycle of `corput serve`: it loads the config,
// places the gateway in its fleet, takes over the sockets a supervisor
// hands it, runs the gateway with its reload sources (SIGHUP, --watch, a
// control plane's moves), and drains it on SIGTERM or SIGINT. The gateway
// itself (listeners, loops, proxying, reload, drain) is internal/gateway's;
// this package decides when each step happens and what ends the process.
// docs/gateway.md ("Reload", "Restart without refusals") and
// docs/decisions.md ("Fleet positions from the control plane") describe
// the behaviour; cmd/corput only parses the flags into Options.
//
// Invariants:
//   - From Run's first step, SIGHUP and SIGUSR1 never end the process:
//     before the gateway runs they are dropped (the file is being read
//     anyway); once it runs, SIGHUP reloads the configuration, applied in
//     place or refused whole with the running one kept, and SIGUSR1
//     reopens the access log. Each handler runs one signal at a time.
//   - SIGTERM and SIGINT are heard before any listener opens and before
//     any wait for the control plane: one that arrives during start-up
//     ends the wait, or drains, and Run returns nil (exit 0); it never
//     kills the process.
//   - Sockets handed over by socket activation (LISTEN_FDS, for the
//     process LISTEN_PID names) are served instead of binding new ones;
//     the variables are cleared either way, so no child takes them.
//   - The fleet position comes, in this order, from the flags, the
//     environment, the keys of the file's fleet block the file writes,
//     and the hostname. With fleet.server the control plane is its only
//     source: a flag or variable that gives one is refused, and the
//     gateway does not start before the first position (one made up
//     meanwhile could be another gateway's). While it waits, the admin
//     address answers /healthz ok and /readyz 503 and is then handed,
//     open, to the gateway: it never goes unbound, and a connection
//     accepted during the hand-over is the gateway's first.
//   - A reload places the gateway again from the same inputs; placed by a
//     control plane, it keeps the newest position the control plane gave.
//     A move the gateway refuses is tried again every moveRetry, at the
//     newest position, until one is applied.
//   - Run returns only after the drain (bounded by shutdown.drain_timeout)
//     and after every goroutine it started has ended: the watcher, the
//     moves, membership discovery and the control plane's stream.
//   - An error Run returns for input the operator fixes (the config, a
//     flag against it, the sockets handed over) satisfies IsConfigError;
//     any other is a failure to start or to wait.
package serve

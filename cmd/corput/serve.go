package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/corput/corput/internal/serve"
	"github.com/corput/corput/internal/watch"
)

func init() {
	register(command{name: "serve", summary: "run the gateway", run: runServe})
}

// runServe is `corput serve --config FILE [--fleet-instance N --fleet-size G]
// [--watch]`. It refuses an invalid config exactly as `corput check`
// reports it (exit 2), serves until SIGTERM or SIGINT, then drains and
// exits 0; internal/serve is the lifecycle.
func runServe(args []string, _, stderr io.Writer) int {
	fs := flagSet("corput serve", stderr, "Usage of corput serve:")
	o := serve.Options{Diagnostics: stderr}
	fs.StringVar(&o.Config, "config", "", "the config `FILE`")
	instance := fs.Int("fleet-instance", 0, "this gateway's position in the fleet (overrides CORPUT_FLEET_INSTANCE and fleet.instance)")
	size := fs.Int("fleet-size", 0, "gateways in the fleet (overrides CORPUT_FLEET_SIZE and fleet.size)")
	level := logLevel(fs)
	fs.StringVar(&o.Admin, "admin", "", "the admin listener's `ADDR` (overrides admin.listen: two instances sharing one socket need an admin each)")
	fs.BoolVar(&o.Watch, "watch", false, "reload when the config file or a file it names (certificates, keys, CAs) changes")
	fs.DurationVar(&o.WatchDebounce, "watch-debounce", watch.DefaultDebounce, "with --watch: how long a burst of file events must be quiet before it is one reload")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if o.Config == "" {
		fmt.Fprintln(stderr, "corput serve: --config FILE is required")
		return 2
	}
	var ok bool
	if o.Logger, ok = newLogger("corput serve", *level, stderr); !ok {
		return 2
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "fleet-instance":
			o.Instance = instance
		case "fleet-size":
			o.Size = size
		}
	})
	return exitCode("corput serve", serve.Run(context.Background(), o), serve.IsConfigError, stderr)
}

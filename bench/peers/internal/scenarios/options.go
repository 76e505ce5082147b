package scenarios

import "time"

// Options are a run's settings: the command's flags.
type Options struct {
	Corput     string // corput binary; "" builds ./cmd/corput into Out/bin
	Balancer   string // corput's origins[].balancer flow mapping
	Downstream string // corput's downstream flow mapping; "" for none
	Out        string // the output directory
	Proxies    []string
	Scenarios  []string
	Rounds     int  // runs of each scenario per proxy; the median is reported
	RawRounds  int  // runs of raw per proxy; 0: Rounds
	Install    bool // apt-get install what is missing
	Forwarded  bool // nginx and HAProxy add the X-Forwarded-* fields
	Verbose    bool // a line per run on stderr
	Seed       uint64

	RawDuration  time.Duration
	RawConns     int
	SkewDuration time.Duration
	Rate         float64 // open-loop rate of skewed, cold_join and the TLS scenarios, req/s
	JoinAfter    time.Duration
	JoinWindow   time.Duration
	OvDuration   time.Duration
	OvRate       float64 // 0: half of corput's raw req/s in this run
	OriginProcs  int     // GOMAXPROCS of each origin; 0: Go's default

	Spread SpreadOptions
	H2     H2Options
	TLS    TLSOptions // tls_origins
	Many   ManyOptions
}

// SpreadOptions are the spread scenario's settings.
type SpreadOptions struct {
	Origins, Listeners int // origin processes, listeners (endpoints) each
	Loops              int // corput's loops
	Duration           time.Duration
	Conns, FewConns    int // connections of the first and the last wrk load
	Streams            int // concurrent streams of the h2load load's one connection
	H2Requests         int // requests of the h2load load
}

// H2Options are the h2 scenarios' settings.
type H2Options struct {
	Origins     int
	Streams     int
	PerConn     int
	Ramp        time.Duration
	Hold        time.Duration
	CPUDuration time.Duration
	CPUConns    int
	CorputPool  string // corput's pool: line's flow mapping; "" for its defaults
}

// TLSOptions are tls_origins' settings; CorputProtocol is many_endpoints'
// too.
type TLSOptions struct {
	Origins, Listeners int
	CorputProtocol     string // corput's origins[].protocol: auto, h1 or h2
}

// ManyOptions are many_endpoints' settings.
type ManyOptions struct {
	Origins, Listeners int
	Warmup, Window     time.Duration
}

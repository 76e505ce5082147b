package route

// Redirect is a route's redirect (routes[].redirect), ready to build a
// Location from a request: each empty part keeps the request's.
type Redirect struct {
	Scheme string // "http", "https"; "": the request's
	Host   string // without a port; "": the request's
	// Port is the Location's port, left out when it is the scheme's own
	// (80, 443); 0: none when Scheme is set, else the request's Host's.
	Port int
	// Path replaces the whole path; else Prefix, when PrefixSet,
	// replaces the route's PathPrefix.
	Path       string
	Prefix     string
	PrefixSet  bool
	StripQuery bool
	Status     int
}

// Answer is a route's fixed answer (routes[].answer).
type Answer struct {
	Status int
	Body   string
	// Fields are the answer's fields, Content-Type first when it has one:
	// names in canonical form, pairs of name and value.
	Fields [][2]string
}

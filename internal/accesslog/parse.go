package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Line is a line read back by Parse. A combined line's Client is the
// address without its port, its Time has seconds only, and "-" reads as
// empty (Loop -1).
type Line struct {
	Time      time.Time
	Client    string
	Method    string
	Host      string
	Path      string // the target up to '?'
	Query     string // after '?'
	Proto     string
	Status    int
	Bytes     int64
	Duration  time.Duration // to the microsecond
	Referer   string
	UserAgent string
	Origin    string
	Endpoint  string
	Attempts  int
	Error     string
	Loop      int
	Limit     string // "" when no time limit ended the exchange
	RequestID string // "" without downstream.request_id
}

// Parse reads one line of either format back (a JSON line starts with
// '{'), strictly: a field missing, unknown or malformed is an error. It is
// for tests and tools that read the log; the gateway never parses it.
func Parse(line string) (Line, error) {
	line = strings.TrimSuffix(line, "\n")
	if strings.HasPrefix(line, "{") {
		return parseJSON(line)
	}
	return parseCombined(line)
}

// jsonFields is a JSON line's object; every field is required.
type jsonFields struct {
	Time      *time.Time `json:"time"`
	Client    *string    `json:"client"`
	Method    *string    `json:"method"`
	Host      *string    `json:"host"`
	Path      *string    `json:"path"`
	Query     *string    `json:"query"`
	Proto     *string    `json:"proto"`
	Status    *int       `json:"status"`
	Bytes     *int64     `json:"bytes"`
	Duration  *float64   `json:"duration"`
	Referer   *string    `json:"referer"`
	UserAgent *string    `json:"user_agent"`
	Origin    *string    `json:"origin"`
	Endpoint  *string    `json:"endpoint"`
	Attempts  *int       `json:"attempts"`
	Error     *string    `json:"error"`
	Loop      *int       `json:"loop"`
	Limit     *string    `json:"limit"`
	RequestID *string    `json:"request_id"`
}

func parseJSON(line string) (Line, error) {
	var f jsonFields
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Line{}, fmt.Errorf("accesslog: not a JSON line: %w", err)
	}
	if dec.More() {
		return Line{}, fmt.Errorf("accesslog: more than one JSON object on a line")
	}
	if f.Time == nil || f.Client == nil || f.Method == nil || f.Host == nil || f.Path == nil || f.Query == nil ||
		f.Proto == nil || f.Status == nil || f.Bytes == nil || f.Duration == nil || f.Referer == nil ||
		f.UserAgent == nil || f.Origin == nil || f.Endpoint == nil || f.Attempts == nil || f.Error == nil || f.Loop == nil || f.Limit == nil ||
		f.RequestID == nil {
		return Line{}, fmt.Errorf("accesslog: a JSON line without all of its 19 fields: %s", line)
	}
	return Line{
		Time: *f.Time, Client: *f.Client, Method: *f.Method, Host: *f.Host, Path: *f.Path, Query: *f.Query,
		Proto: *f.Proto, Status: *f.Status, Bytes: *f.Bytes, Duration: seconds(*f.Duration),
		Referer: *f.Referer, UserAgent: *f.UserAgent, Origin: *f.Origin, Endpoint: *f.Endpoint,
		Attempts: *f.Attempts, Error: *f.Error, Loop: *f.Loop, Limit: *f.Limit, RequestID: *f.RequestID,
	}, nil
}

func seconds(s float64) time.Duration {
	return (time.Duration(s*1e9+500) / time.Microsecond) * time.Microsecond
}

// combined matches a combined line; an item is a quoted, Apache-escaped
// string.
var combined = func() *regexp.Regexp {
	const item = `"((?:[^"\\]|\\.)*)"`
	return regexp.MustCompile(`^(\S+) - - \[([^\]]+)\] "(\S+) (\S+) (\S+)" (\d{3}) (\d+|-) ` + item + ` ` + item +
		` host=` + item + ` origin=(\S+) endpoint=(\S+) attempts=(\d+) error=(\S+) loop=(\d+|-) duration=(\d+\.\d{6}) limit=(\S+) request_id=(\S+)$`)
}()

func parseCombined(line string) (Line, error) {
	m := combined.FindStringSubmatch(line)
	if m == nil {
		return Line{}, fmt.Errorf("accesslog: not a combined line: %s", line)
	}
	t, err := time.Parse("02/Jan/2006:15:04:05 -0700", m[2])
	if err != nil {
		return Line{}, fmt.Errorf("accesslog: combined time: %w", err)
	}
	var l Line
	l.Time = t
	var target string
	for _, f := range []struct {
		dst *string
		src string
	}{{&l.Client, m[1]}, {&l.Method, m[3]}, {&target, m[4]}, {&l.Proto, m[5]}, {&l.Referer, m[8]},
		{&l.UserAgent, m[9]}, {&l.Host, m[10]}, {&l.Origin, m[11]}, {&l.Endpoint, m[12]}, {&l.Error, m[14]}, {&l.Limit, m[17]}, {&l.RequestID, m[18]}} {
		if *f.dst, err = unescapeApache(dash(f.src)); err != nil {
			return Line{}, err
		}
	}
	l.Path, l.Query, _ = strings.Cut(target, "?")
	l.Status, _ = strconv.Atoi(m[6])
	l.Bytes, _ = strconv.ParseInt(dash(m[7]), 10, 64)
	l.Attempts, _ = strconv.Atoi(m[13])
	l.Loop = -1
	if m[15] != "-" {
		l.Loop, _ = strconv.Atoi(m[15])
	}
	d, _ := strconv.ParseFloat(m[16], 64)
	l.Duration = seconds(d)
	return l, nil
}

// dash reads "-" as empty.
func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// unescapeApache undoes appendApache.
func unescapeApache(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i++; i == len(s) {
			return "", fmt.Errorf("accesslog: a lone backslash ends %q", s)
		}
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte(c)
		case 'b':
			b.WriteByte('\b')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x':
			if i+3 > len(s) {
				return "", fmt.Errorf("accesslog: a short \\x escape in %q", s)
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("accesslog: a bad \\x escape in %q", s)
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			return "", fmt.Errorf("accesslog: an unknown escape \\%c in %q", c, s)
		}
	}
	return b.String(), nil
}

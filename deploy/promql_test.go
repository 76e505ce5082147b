package deploy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A small PromQL parser, enough to check the dashboard's expressions. It
// builds a tree of selectors, calls, aggregations and binary operations and
// refuses anything it does not understand, so that an unsupported construct
// fails the test instead of passing unchecked. Operator precedence is not
// modelled: the checks only need to know what is inside what.

// exprKind says what an expr node is.
type exprKind int

const (
	selectorExpr exprKind = iota // name{matchers}[range]
	callExpr                     // function(args)
	aggExpr                      // op [by|without (labels)] ([param,] expr)
	binaryExpr                   // args[0] op [on|ignoring (labels)] args[1]
	numberExpr
	stringExpr
)

// expr is one node of a parsed PromQL expression.
type expr struct {
	kind     exprKind
	name     string    // metric (selector), function (call), operator (aggregation, binary)
	matchers []matcher // selector
	rng      string    // the text in [...] after a selector or subquery
	grouping []string  // by/without labels (aggregation), on/ignoring labels (binary)
	without  bool      // grouping is without(...) or ignoring(...)
	args     []*expr
}

// matcher is one label matcher of a selector.
type matcher struct{ label, op, value string }

// walk calls f on e and every node below it, parents first.
func (e *expr) walk(f func(*expr)) {
	f(e)
	for _, a := range e.args {
		a.walk(f)
	}
}

// selectors returns every selector in e.
func (e *expr) selectors() []*expr {
	var out []*expr
	e.walk(func(n *expr) {
		if n.kind == selectorExpr {
			out = append(out, n)
		}
	})
	return out
}

// aggregations are PromQL's aggregation operators; the ones listed with a
// parameter take it before the expression.
var aggregations = map[string]bool{
	"sum": false, "avg": false, "min": false, "max": false, "count": false, "group": false,
	"stddev": false, "stdvar": false,
	"topk": true, "bottomk": true, "quantile": true, "count_values": true, "limitk": true, "limit_ratio": true,
}

// functions are the PromQL functions the parser accepts, with how many
// arguments each takes at least and at most.
var functions = map[string][2]int{
	"rate": {1, 1}, "irate": {1, 1}, "increase": {1, 1}, "delta": {1, 1}, "idelta": {1, 1}, "deriv": {1, 1},
	"changes": {1, 1}, "resets": {1, 1},
	"histogram_quantile": {2, 2},
	"avg_over_time":      {1, 1}, "min_over_time": {1, 1}, "max_over_time": {1, 1}, "sum_over_time": {1, 1},
	"clamp_min": {2, 2}, "clamp_max": {2, 2}, "abs": {1, 1}, "ceil": {1, 1}, "floor": {1, 1}, "round": {1, 2},
	"vector": {1, 1}, "scalar": {1, 1}, "absent": {1, 1}, "time": {0, 0},
}

// setOperators are the binary operators spelt as words.
var setOperators = []string{"and", "or", "unless"}

type tokenKind int

const (
	tEOF tokenKind = iota
	tIdent
	tNumber
	tString
	tRange // the text between [ and ]
	tOp    // arithmetic, comparison and matcher operators
	tPunct // ( ) { } ,
)

type token struct {
	kind tokenKind
	text string
	pos  int
}

// lex splits a PromQL expression into tokens.
func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case isIdentStart(c):
			for i < len(s) && (isIdentStart(s[i]) || isDigit(s[i])) {
				i++
			}
			toks = append(toks, token{tIdent, s[start:i], start})
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
				i++
			}
			if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
				i++
				if i < len(s) && (s[i] == '+' || s[i] == '-') {
					i++
				}
				for i < len(s) && isDigit(s[i]) {
					i++
				}
			}
			toks = append(toks, token{tNumber, s[start:i], start})
		case c == '"':
			i++
			for i < len(s) && s[i] != '"' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(s) {
				return nil, fmt.Errorf("offset %d: unterminated string", start)
			}
			i++
			v, err := strconv.Unquote(s[start:i])
			if err != nil {
				return nil, fmt.Errorf("offset %d: string %s: %v", start, s[start:i], err)
			}
			toks = append(toks, token{tString, v, start})
		case c == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("offset %d: [ without ]", start)
			}
			toks = append(toks, token{tRange, strings.TrimSpace(s[i+1 : i+end]), start})
			i += end + 1
		case strings.ContainsRune("(){},", rune(c)):
			i++
			toks = append(toks, token{tPunct, s[start:i], start})
		default:
			op := ""
			for _, o := range []string{"==", "!=", "<=", ">=", "=~", "!~", "+", "-", "*", "/", "%", "^", "<", ">", "="} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("offset %d: unexpected %q", start, c)
			}
			i += len(op)
			toks = append(toks, token{tOp, op, start})
		}
	}
	return append(toks, token{kind: tEOF, pos: len(s)}), nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parser is a recursive-descent parser over the tokens of one expression.
type parser struct {
	toks []token
	i    int
}

// parsePromQL parses one PromQL expression.
func parsePromQL(s string) (*expr, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, fmt.Errorf("offset %d: unexpected %q after the expression", t.pos, t.text)
	}
	return e, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// is reports whether the next token is one of the given punctuation,
// operator or keyword texts.
func (p *parser) is(texts ...string) bool {
	t := p.peek()
	return (t.kind == tPunct || t.kind == tOp || t.kind == tIdent) && slices.Contains(texts, t.text)
}

func (p *parser) expect(text string) error {
	if t := p.next(); t.text != text || t.kind == tString {
		return fmt.Errorf("offset %d: want %q, have %q", t.pos, text, t.text)
	}
	return nil
}

// expr := unary { binop [bool] [on|ignoring (labels) [group_left|group_right [(labels)]]] unary }
func (p *parser) expr() (*expr, error) {
	lhs, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		isBinary := (t.kind == tOp && !slices.Contains([]string{"=", "=~", "!~"}, t.text)) ||
			(t.kind == tIdent && slices.Contains(setOperators, t.text))
		if !isBinary {
			return lhs, nil
		}
		p.next()
		b := &expr{kind: binaryExpr, name: t.text}
		if p.is("bool") {
			p.next()
		}
		if p.is("on", "ignoring") {
			b.without = p.next().text == "ignoring"
			if b.grouping, err = p.labelList(); err != nil {
				return nil, err
			}
			if p.is("group_left", "group_right") {
				p.next()
				if p.is("(") {
					if _, err := p.labelList(); err != nil {
						return nil, err
					}
				}
			}
		}
		rhs, err := p.unary()
		if err != nil {
			return nil, err
		}
		b.args = []*expr{lhs, rhs}
		lhs = b
	}
}

// unary := [+|-] postfix
func (p *parser) unary() (*expr, error) {
	if p.is("+", "-") {
		p.next()
		return p.unary()
	}
	e, err := p.primary()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tRange {
		p.next()
		if e.rng != "" {
			return nil, fmt.Errorf("offset %d: two ranges in a row", t.pos)
		}
		e.rng = t.text
	}
	if p.is("offset", "@") {
		return nil, fmt.Errorf("offset %d: %s modifiers are not supported by this checker", p.peek().pos, p.peek().text)
	}
	return e, nil
}

// primary := number | string | ( expr ) | aggregation | call | selector
func (p *parser) primary() (*expr, error) {
	t := p.next()
	switch t.kind {
	case tNumber:
		return &expr{kind: numberExpr, name: t.text}, nil
	case tString:
		return &expr{kind: stringExpr, name: t.text}, nil
	case tPunct:
		if t.text == "(" {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			return e, p.expect(")")
		}
		if t.text == "{" {
			return nil, fmt.Errorf("offset %d: a selector without a metric name", t.pos)
		}
	case tIdent:
		if _, ok := aggregations[t.text]; ok {
			return p.aggregation(t.text)
		}
		if p.is("(") {
			return p.call(t)
		}
		if slices.Contains(setOperators, t.text) || slices.Contains([]string{"by", "without", "on", "ignoring", "bool", "offset"}, t.text) {
			return nil, fmt.Errorf("offset %d: keyword %q where an expression belongs", t.pos, t.text)
		}
		sel := &expr{kind: selectorExpr, name: t.text}
		if p.is("{") {
			var err error
			if sel.matchers, err = p.matchers(); err != nil {
				return nil, err
			}
		}
		return sel, nil
	}
	return nil, fmt.Errorf("offset %d: unexpected %q", t.pos, t.text)
}

// aggregation := op [by|without (labels)] ( [param ,] expr ) [by|without (labels)]
func (p *parser) aggregation(op string) (*expr, error) {
	e := &expr{kind: aggExpr, name: op}
	grouped := false
	group := func() error {
		if !p.is("by", "without") {
			return nil
		}
		if grouped {
			return fmt.Errorf("offset %d: %s grouped twice", p.peek().pos, op)
		}
		grouped = true
		e.without = p.next().text == "without"
		var err error
		e.grouping, err = p.labelList()
		return err
	}
	if err := group(); err != nil {
		return nil, err
	}
	args, err := p.argList()
	if err != nil {
		return nil, err
	}
	want := 1
	if aggregations[op] {
		want = 2
	}
	if len(args) != want {
		return nil, fmt.Errorf("%s takes %d arguments, has %d", op, want, len(args))
	}
	e.args = args
	return e, group()
}

// call := function ( args )
func (p *parser) call(name token) (*expr, error) {
	arity, ok := functions[name.text]
	if !ok {
		return nil, fmt.Errorf("offset %d: unknown function %q", name.pos, name.text)
	}
	args, err := p.argList()
	if err != nil {
		return nil, err
	}
	if len(args) < arity[0] || len(args) > arity[1] {
		return nil, fmt.Errorf("offset %d: %s takes %d to %d arguments, has %d", name.pos, name.text, arity[0], arity[1], len(args))
	}
	return &expr{kind: callExpr, name: name.text, args: args}, nil
}

// argList := ( [expr {, expr}] )
func (p *parser) argList() ([]*expr, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var args []*expr
	for !p.is(")") {
		a, err := p.expr()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if !p.is(",") {
			break
		}
		p.next()
	}
	return args, p.expect(")")
}

// labelList := ( [label {, label}] [,] )
func (p *parser) labelList() ([]string, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []string
	for !p.is(")") {
		t := p.next()
		if t.kind != tIdent {
			return nil, fmt.Errorf("offset %d: want a label name, have %q", t.pos, t.text)
		}
		out = append(out, t.text)
		if !p.is(",") {
			break
		}
		p.next()
	}
	return out, p.expect(")")
}

// matchers := { [label op "value" {, label op "value"}] [,] }
func (p *parser) matchers() ([]matcher, error) {
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	var out []matcher
	for !p.is("}") {
		l, op, v := p.next(), p.next(), p.next()
		if l.kind != tIdent || op.kind != tOp || !slices.Contains([]string{"=", "!=", "=~", "!~"}, op.text) || v.kind != tString {
			return nil, fmt.Errorf("offset %d: want label op \"value\"", l.pos)
		}
		out = append(out, matcher{l.text, op.text, v.text})
		if !p.is(",") {
			break
		}
		p.next()
	}
	return out, p.expect("}")
}

package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileBytes bounds the size of a config file Load accepts.
const MaxFileBytes = 16 << 20

// Load reads and parses the config file at path. Errors reading the file
// are returned as they are; problems in its content as Diagnostics.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("config: %s is larger than %d bytes; is it the right file?", path, MaxFileBytes)
	}
	return Parse(data, path)
}

// Parse decodes and validates a config. name is the file's path: it is used
// in diagnostics and relative file paths in the config are resolved against
// its directory. On any error-severity finding Parse returns a nil Config
// and a Diagnostics error listing every finding (warnings included), sorted
// by line; otherwise the warnings are kept in Config.Warnings.
func Parse(data []byte, name string) (*Config, error) {
	r := &reporter{file: name, lines: map[string]int{}}
	root := parseYAML(data, r)
	if root == nil {
		return nil, r.diags
	}
	cfg := Default()
	d := &decoder{reporter: r, budget: maxNodes}
	d.decode(root, reflect.ValueOf(cfg).Elem(), "")
	if root.Kind != yaml.MappingNode {
		if len(r.diags.Errors()) == 0 {
			// A bare null ("~", "&a") decodes into nothing without a
			// complaint; it is still not a config.
			r.errorf("", "the config is not a mapping of keys; start from examples/gateway.yaml")
		}
		return nil, r.diags // nothing was decoded; checking the defaults would only add noise
	}
	cfg.file, cfg.lines, cfg.source = name, r.lines, bytes.Clone(data)
	cfg.normalize(filepath.Dir(name))
	cfg.diagnose(r)
	r.diags.Sort()
	if len(r.diags.Errors()) > 0 {
		return nil, r.diags
	}
	cfg.warnings = r.diags
	return cfg, nil
}

// parseYAML returns the root node of the single document in data, or nil
// after reporting why there is none.
func parseYAML(data []byte, r *reporter) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			r.errorf("", "the file is empty; start from examples/gateway.yaml")
		} else {
			reportSyntax(r, err)
		}
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		r.diags = append(r.diags, Diagnostic{File: r.file, Line: next.Line,
			Message: "a second YAML document (after ---); put the whole config in one document"})
		return nil
	case !errors.Is(err, io.EOF):
		reportSyntax(r, err)
		return nil
	}
	if len(doc.Content) == 0 {
		r.errorf("", "the file is empty; start from examples/gateway.yaml")
		return nil
	}
	return doc.Content[0]
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// reportSyntax turns a YAML parser error into a diagnostic with its line.
func reportSyntax(r *reporter, err error) {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	r.diags = append(r.diags, Diagnostic{File: r.file, Line: line, Message: "YAML syntax: " + msg})
}

// normalize lower-cases route hosts and resolves relative file paths
// (TLS files, discovery.path, admin.token_file) against dir.
func (c *Config) normalize(dir string) {
	for i := range c.Routes {
		c.Routes[i].Host = strings.ToLower(c.Routes[i].Host)
	}
	c.inheritRetry()
	resolve(dir, &c.Admin.TokenFile)
	if c.TLS != nil {
		resolve(dir, c.TLS.Paths()...)
	}
	for i := range c.Origins {
		o := &c.Origins[i]
		if o.TLS != nil {
			resolve(dir, &o.TLS.CA, &o.TLS.Cert, &o.TLS.Key)
		}
		resolve(dir, &o.Discovery.Path)
		if t := o.Discovery.TLS; t != nil {
			resolve(dir, &t.CA, &t.Cert, &t.Key)
		}
	}
	if t := c.Fleet.TLS; t != nil {
		resolve(dir, &t.CA, &t.Cert, &t.Key)
	}
	if t := c.Tracing; t != nil && t.TLS != nil {
		resolve(dir, &t.TLS.CA, &t.TLS.Cert, &t.TLS.Key)
	}
	if a := c.AccessLog; a != nil && a.Path != AccessLogStdout {
		resolve(dir, &a.Path)
	}
}

func resolve(dir string, paths ...*string) {
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

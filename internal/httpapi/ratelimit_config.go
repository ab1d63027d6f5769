package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// TenantRateLimits are the tenants' budgets per route class: Default for every tenant, Overrides for some.
// It is read-only once loaded, so one value may serve concurrent requests.
type TenantRateLimits struct {
	Default   ClassLimits
	Overrides map[string]ClassLimits
}

// ClassLimits are one budget per route class; nil is not given.
type ClassLimits struct {
	Reads, Writes, Watches *Limit
}

func (c ClassLimits) of(class routeClass) *Limit {
	switch class {
	case classWrites:
		return c.Writes
	case classWatches:
		return c.Watches
	default:
		return c.Reads
	}
}

// For returns tenant's budget for class: its override if the class has one, else the default's; the zero Limit
// (unlimited) if neither names the class.
func (t *TenantRateLimits) For(tenant string, class routeClass) Limit {
	if l := t.Overrides[tenant].of(class); l != nil {
		return *l
	}
	if l := t.Default.of(class); l != nil {
		return *l
	}
	return Limit{}
}

// LoadTenantRateLimits reads the rate-limits file at path (YAML, or JSON), shaped as
//
//	tenants:
//	  default: {reads: {rate: 50, burst: 100}, writes: {rate: 10, burst: 20}, watches: {rate: 1, burst: 5}}
//	  overrides:
//	    acme: {writes: {rate: 50, burst: 50}}
//
// rate is requests per second (0 or absent: unlimited), burst the requests allowed at once (0 or absent: one
// second's worth). It returns an error naming the line of the first unknown or repeated key, negative, non-finite
// or non-numeric value, or empty tenant; an empty file limits nothing.
func LoadTenantRateLimits(path string) (*TenantRateLimits, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read rate-limits file: %w", err)
	}
	limits, err := parseTenantRateLimits(raw)
	if err != nil {
		return nil, fmt.Errorf("rate-limits file %s: %w", path, err)
	}
	return limits, nil
}

func parseTenantRateLimits(raw []byte) (*TenantRateLimits, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(raw)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &TenantRateLimits{}, nil
		}
		return nil, err
	}
	out := &TenantRateLimits{}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return out, nil
	}
	err := eachField(doc.Content[0], "", []string{"tenants"}, func(_ string, tenants *yaml.Node) error {
		return eachField(tenants, "tenants", []string{"default", "overrides"}, func(key string, n *yaml.Node) error {
			if key == "default" {
				var err error
				out.Default, err = parseClassLimits(n, "tenants.default")
				return err
			}
			out.Overrides = map[string]ClassLimits{}
			return eachField(n, "tenants.overrides", nil, func(tenant string, n *yaml.Node) error {
				if strings.TrimSpace(tenant) == "" {
					return fmt.Errorf("line %d: tenants.overrides: a tenant's name is empty", n.Line)
				}
				c, err := parseClassLimits(n, "tenants.overrides."+tenant)
				out.Overrides[tenant] = c
				return err
			})
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func parseClassLimits(n *yaml.Node, path string) (ClassLimits, error) {
	var c ClassLimits
	err := eachField(n, path, []string{classReads.String(), classWrites.String(), classWatches.String()}, func(key string, n *yaml.Node) error {
		l, err := parseLimit(n, path+"."+key)
		switch key {
		case classReads.String():
			c.Reads = l
		case classWrites.String():
			c.Writes = l
		default:
			c.Watches = l
		}
		return err
	})
	return c, err
}

func parseLimit(n *yaml.Node, path string) (*Limit, error) {
	l := &Limit{}
	err := eachField(n, path, []string{"rate", "burst"}, func(key string, n *yaml.Node) error {
		n = resolve(n)
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			return fmt.Errorf("line %d: %s.%s: %q is not a number", n.Line, path, key, n.Value)
		}
		if key == "burst" {
			v, err := strconv.ParseInt(n.Value, 0, 32)
			if err != nil || v < 0 {
				return fmt.Errorf("line %d: %s.burst: %s is not 0 (one second's worth) or a positive whole number", n.Line, path, n.Value)
			}
			l.Burst = int(v)
			return nil
		}
		var v float64
		if err := n.Decode(&v); err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("line %d: %s.rate: %s is not 0 (unlimited) or a positive number of requests per second", n.Line, path, n.Value)
		}
		l.Rate = v
		return nil
	})
	return l, err
}

// eachField calls f with each key and value of the mapping n (at path, for errors), in order. It returns an error
// naming the line if n is not a mapping (null counts as empty), a key repeats, or, when allowed is not nil, a key
// is not one of allowed; and the first error f returns.
func eachField(n *yaml.Node, path string, allowed []string, f func(key string, value *yaml.Node) error) error {
	where := path
	if where == "" {
		where = "the file"
	}
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s must be a mapping", n.Line, where)
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: keys must be names", k.Line, where)
		}
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			return fmt.Errorf("line %d: %s: unknown key %q (want %s)", k.Line, where, k.Value, strings.Join(allowed, ", "))
		}
		if seen[k.Value] {
			return fmt.Errorf("line %d: %s: %q given twice", k.Line, where, k.Value)
		}
		seen[k.Value] = true
		if err := f(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// resolve follows an alias (*name) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Output formats.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatName  = "name"
)

// listing is what get and list show: resources of one kind and what their table needs.
type listing struct {
	kind    *kind
	objects []*object
	parents map[uuid.UUID]string // node pools' cluster names
	// envelope is the API's page without its items: its number, size and the total the API counted.
	envelope page
	// single is a get of one resource by name: -o json and yaml print the resource rather than a list.
	single bool
}

// printListing prints l in format (one of the formats above).
func printListing(w io.Writer, format string, l *listing, now time.Time, noHeaders bool) error {
	switch format {
	case formatJSON, formatYAML:
		doc, err := l.document()
		if err != nil {
			return err
		}
		return printDocument(w, format, doc)
	case formatName:
		for _, o := range l.objects {
			if _, err := fmt.Fprintf(w, "%s/%s\n", l.kind.name, o.name()); err != nil {
				return err
			}
		}
		return nil
	default:
		return printTable(w, l, format == formatWide, now, noHeaders)
	}
}

// document is l as the API's JSON: the resource for a get of one, else a list like the API's own page.
func (l *listing) document() ([]byte, error) {
	if l.single && len(l.objects) == 1 {
		return l.objects[0].raw, nil
	}
	doc := l.envelope
	doc.Items = make([]json.RawMessage, len(l.objects))
	for i, o := range l.objects {
		doc.Items[i] = o.raw
	}
	return json.Marshal(doc)
}

// printDocument prints the API's JSON indented, or as YAML.
func printDocument(w io.Writer, format string, doc []byte) error {
	var out []byte
	if format == formatYAML {
		y, err := yaml.JSONToYAML(doc)
		if err != nil {
			return fmt.Errorf("render YAML: %w", err)
		}
		out = y
	} else {
		var buf bytes.Buffer
		if err := json.Indent(&buf, doc, "", "  "); err != nil {
			return fmt.Errorf("render JSON: %w", err)
		}
		buf.WriteByte('\n')
		out = buf.Bytes()
	}
	_, err := w.Write(out)
	return err
}

// newTable is a tabwriter laid out as kubectl lays out its tables.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0) }

// printTable prints NAME, the kind's own columns, PHASE, GENERATION and AGE; wide adds ID and CONDITIONS.
func printTable(w io.Writer, l *listing, wide bool, now time.Time, noHeaders bool) error {
	tw := newTable(w)
	if !noHeaders {
		head := append([]string{"NAME"}, l.kind.columns...)
		head = append(head, "PHASE", "GENERATION", "AGE")
		if wide {
			head = append(head, "ID", "CONDITIONS")
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
	}
	for _, o := range l.objects {
		cells, err := l.kind.cells(o.raw, l.parents)
		if err != nil {
			return fmt.Errorf("decode %s %s: %w", l.kind.name, o.name(), err)
		}
		row := append([]string{o.name()}, cells...)
		row = append(row, orNone(o.phase()), fmt.Sprint(o.generation()), age(now, deref(o.CreatedTime)))
		if wide {
			row = append(row, o.Id.String(), conditionsSummary(o.conditions()))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// conditionsSummary lists conditions on one line: True ones by type, the others with status and reason,
// "Ready=False(AdaptersMissing),Available=False(AdaptersMissing)".
func conditionsSummary(conds []api.Condition) string {
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		if c.Status == api.ConditionStatus(conditions.True) {
			parts = append(parts, c.Type)
			continue
		}
		s := c.Type + "=" + string(c.Status)
		if r := deref(c.Reason); r != "" {
			s += "(" + r + ")"
		}
		parts = append(parts, s)
	}
	return orNone(strings.Join(parts, ","))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// age renders how long ago t was the way kubectl does: 45s, 5m30s, 3h, 2d5h.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0 // a server clock slightly ahead of ours
	}
	s, m, h := int(d.Seconds()), int(d.Minutes()), int(d.Hours())
	days := h / 24
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", s)
	case d < 10*time.Minute:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, s%60)
	case d < 3*time.Hour:
		return fmt.Sprintf("%dm", m)
	case d < 8*time.Hour:
		if m%60 == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", h)
	case d < 8*24*time.Hour:
		if h%24 == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, h%24)
	case d < 2*365*24*time.Hour:
		return fmt.Sprintf("%dd", days)
	default:
		return fmt.Sprintf("%dy", days/365)
	}
}

// printResult prints the outcome of a change: "cluster/demo created" by default, or the resource in format.
func printResult(w io.Writer, format string, k *kind, o *object, what string) error {
	switch format {
	case formatJSON, formatYAML:
		return printDocument(w, format, o.raw)
	case formatName:
		_, err := fmt.Fprintf(w, "%s/%s\n", k.name, o.name())
		return err
	default:
		_, err := fmt.Fprintf(w, "%s/%s %s\n", k.name, o.name(), what)
		return err
	}
}

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Output formats. The templated ones take their template after "=": -o jsonpath='{.items[*].name}'.
const (
	formatTable         = "table"
	formatWide          = "wide"
	formatJSON          = "json"
	formatYAML          = "yaml"
	formatName          = "name"
	formatJSONPath      = "jsonpath="
	formatGoTemplate    = "go-template="
	formatCustomColumns = "custom-columns="
)

// templatedFormats are the formats that take a template, as addOutputFlag lists them.
func templatedFormats() []string {
	return []string{formatJSONPath, formatGoTemplate, formatCustomColumns}
}

// listing is what get and list show: resources of one kind and what their table needs.
type listing struct {
	kind    *api.Kind
	objects []*object
	parents map[uuid.UUID]string // a child kind's parents' names
	// envelope is the API's page without its items: its number, size and the total the API counted.
	envelope page
	// single is a get of one resource by name: -o json, yaml, jsonpath and go-template print the resource rather
	// than a list.
	single bool
	// reports are the table's columns read from the adapters' reports embedded in the objects (reportColumns).
	reports []reportColumn
}

// printer prints listings in one format. Templates are parsed once, when the printer is made, so that a bad one
// is a usage error before any request.
type printer struct {
	format    string // one of the formats above, without a template
	template  string
	noHeaders bool
	columns   []api.Column // custom-columns
	jsonPath  *printers.JSONPathPrinter
	goTmpl    *printers.GoTemplatePrinter
}

// newPrinter parses an -o value. An unknown format or a template that does not parse is a usage error.
func newPrinter(output string, noHeaders bool) (*printer, error) {
	p := &printer{format: output, noHeaders: noHeaders}
	for _, f := range templatedFormats() {
		if tmpl, ok := strings.CutPrefix(output, f); ok {
			p.format, p.template = f, tmpl
		}
	}
	var err error
	switch p.format {
	case formatJSONPath:
		if p.jsonPath, err = printers.NewJSONPathPrinter(p.template); err == nil {
			p.jsonPath.AllowMissingKeys(true)
		}
	case formatGoTemplate:
		if p.goTmpl, err = printers.NewGoTemplatePrinter([]byte(p.template)); err == nil {
			p.goTmpl.AllowMissingKeys(true)
		}
	case formatCustomColumns:
		p.columns, err = parseCustomColumns(p.template)
	}
	if err != nil {
		return nil, usageErrorf("-o %s: %v", output, err)
	}
	return p, nil
}

// parseCustomColumns reads kubectl's custom-columns: "NAME:.name,PHASE:.status.phase" (a path may be written as a
// template too, "{.spec.replicas}").
func parseCustomColumns(spec string) ([]api.Column, error) {
	var out []api.Column
	for part := range strings.SplitSeq(spec, ",") {
		header, path, ok := strings.Cut(part, ":")
		if !ok || header == "" || path == "" {
			return nil, fmt.Errorf("want HEADER:.json.path, comma-separated, got %q", part)
		}
		if !strings.HasPrefix(path, "{") {
			path = "{" + path + "}"
		}
		if err := jsonpath.New(header).Parse(path); err != nil {
			return nil, fmt.Errorf("column %s: %w", header, err)
		}
		out = append(out, api.Column{Header: header, JSONPath: path})
	}
	return out, nil
}

// tabular reports whether the format draws a table, where an empty listing says "No … found." on stderr.
func (p *printer) tabular() bool {
	return p.format == formatTable || p.format == formatWide || p.format == formatCustomColumns
}

// print prints l at now.
func (p *printer) print(w io.Writer, l *listing, now time.Time) error {
	switch p.format {
	case formatJSON, formatYAML:
		doc, err := l.document()
		if err != nil {
			return err
		}
		return printDocument(w, p.format, doc)
	case formatName:
		for _, o := range l.objects {
			if _, err := fmt.Fprintf(w, "%s/%s\n", l.kind.Singular, o.name()); err != nil {
				return err
			}
		}
		return nil
	case formatJSONPath, formatGoTemplate:
		doc, err := l.document()
		if err != nil {
			return err
		}
		return p.printTemplate(w, doc)
	case formatCustomColumns:
		return printColumns(w, p.columns, nil, l, p.noHeaders)
	default:
		return printTable(w, l, p.format == formatWide, now, p.noHeaders)
	}
}

// printTemplate prints doc (the API's JSON) through the jsonpath or go-template printer, as kubectl does.
func (p *printer) printTemplate(w io.Writer, doc []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(doc, &obj); err != nil {
		return fmt.Errorf("decode the document: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if p.jsonPath != nil {
		return p.jsonPath.PrintObj(u, w)
	}
	return p.goTmpl.PrintObj(u, w)
}

// document is l as the API's JSON: the resource for a get of one, else a list like the API's own page.
func (l *listing) document() ([]byte, error) {
	if l.single && len(l.objects) == 1 {
		return l.objects[0].raw, nil
	}
	doc := l.envelope
	doc.ResourceVersion = ""
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

// printTable prints NAME, the parent's name for a child kind (CLUSTER), the kind's own columns, the columns read
// from adapters' reports, PHASE, GENERATION and AGE; wide adds the kind's wide columns, ID and CONDITIONS.
func printTable(w io.Writer, l *listing, wide bool, now time.Time, noHeaders bool) error {
	var columns []api.Column
	for _, c := range l.kind.Columns {
		if wide || !c.Wide {
			columns = append(columns, c)
		}
	}
	lead := []string{"NAME"}
	if l.kind.Parent != nil {
		lead = append(lead, strings.ToUpper(l.kind.Parent.Singular))
	}
	var reports []reportColumn
	for _, c := range l.reports {
		if wide || !c.wide {
			reports = append(reports, c)
		}
	}
	var tail []string
	for _, c := range reports {
		tail = append(tail, c.header)
	}
	tail = append(tail, "PHASE", "GENERATION", "AGE")
	if wide {
		tail = append(tail, "ID", "CONDITIONS")
	}
	fixed := func(o *object) ([]string, []string) {
		head := []string{o.name()}
		if l.kind.Parent != nil {
			name, ok := l.parents[o.ref().Parent]
			if !ok {
				name = o.ref().Parent.String()
			}
			head = append(head, name)
		}
		var rest []string
		for _, c := range reports {
			rest = append(rest, c.cell(o))
		}
		rest = append(rest, orNone(o.phase()), fmt.Sprint(o.generation()), age(now, deref(o.CreatedTime)))
		if wide {
			rest = append(rest, o.Id.String(), conditionsSummary(o.conditions()))
		}
		return head, rest
	}
	return printColumns(w, columns, &tableFrame{lead: lead, tail: tail, cells: fixed}, l, noHeaders)
}

// tableFrame is what a kind's table shows around its own columns.
type tableFrame struct {
	lead, tail []string
	cells      func(o *object) (lead, tail []string)
}

// printColumns prints a table of columns (JSONPath templates evaluated against each resource), inside frame when
// one is given.
func printColumns(w io.Writer, columns []api.Column, frame *tableFrame, l *listing, noHeaders bool) error {
	paths := make([]*jsonpath.JSONPath, len(columns))
	head := make([]string, 0, len(columns)+6)
	if frame != nil {
		head = append(head, frame.lead...)
	}
	for i, c := range columns {
		paths[i] = jsonpath.New(c.Header).AllowMissingKeys(true)
		if err := paths[i].Parse(c.JSONPath); err != nil {
			return fmt.Errorf("column %s of %s: %w", c.Header, l.kind.Name, err)
		}
		head = append(head, c.Header)
	}
	if frame != nil {
		head = append(head, frame.tail...)
	}
	tw := newTable(w)
	if !noHeaders {
		fmt.Fprintln(tw, strings.Join(head, "\t"))
	}
	for _, o := range l.objects {
		var doc any
		if err := json.Unmarshal(o.raw, &doc); err != nil {
			return fmt.Errorf("decode %s %s: %w", l.kind.Singular, o.name(), err)
		}
		var row, tail []string
		if frame != nil {
			row, tail = frame.cells(o)
		}
		for i, p := range paths {
			var cell bytes.Buffer
			if err := p.Execute(&cell, doc); err != nil {
				return fmt.Errorf("column %s of %s %s: %w", columns[i].Header, l.kind.Singular, o.name(), err)
			}
			row = append(row, orNone(strings.Join(strings.Fields(cell.String()), " ")))
		}
		fmt.Fprintln(tw, strings.Join(append(row, tail...), "\t"))
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

// age renders how long ago t was as kubectl does (apimachinery's HumanDuration: 45s, 5m30s, 3h, 2d5h).
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	// A server clock slightly ahead of ours is no time in the future.
	return duration.HumanDuration(max(0, now.Sub(t)))
}

// printResult prints the outcome of a change: "cluster/demo created" by default, or the resource in format.
func printResult(w io.Writer, format string, k *api.Kind, o *object, what string) error {
	switch format {
	case formatJSON, formatYAML:
		return printDocument(w, format, o.raw)
	case formatName:
		_, err := fmt.Fprintf(w, "%s/%s\n", k.Singular, o.name())
		return err
	default:
		_, err := fmt.Fprintf(w, "%s/%s %s\n", k.Singular, o.name(), what)
		return err
	}
}

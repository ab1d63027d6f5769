package resource

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeSchema is a SpecSchema with fixed internal paths and top-level defaults. It validates nothing: these tests
// are about the service's rules, not the schema's.
type fakeSchema struct {
	internal    []string       // dotted paths reported, in this order, when present in a spec (null or not)
	defaults    map[string]any // top-level properties filled in when absent
	defaultsErr error
}

func (f fakeSchema) Validate(map[string]any) []FieldError { return nil }

func (f fakeSchema) ApplyDefaults(spec map[string]any) error {
	if f.defaultsErr != nil {
		return f.defaultsErr
	}
	for k, v := range f.defaults {
		if _, ok := spec[k]; !ok {
			spec[k] = v
		}
	}
	return nil
}

func (f fakeSchema) ImmutableFields() []string { return nil }

func (f fakeSchema) HasInternal() bool { return len(f.internal) > 0 }

// StripInternal is not what these tests are about; the service never calls it.
func (f fakeSchema) StripInternal(map[string]any) bool { return false }

func (f fakeSchema) InternalPaths() ([][]string, bool) { return nil, false }

func (f fakeSchema) InternalFields(spec map[string]any) []string {
	var out []string
	for _, p := range f.internal {
		if present(spec, p) {
			out = append(out, p)
		}
	}
	return out
}

// present reports whether the dotted path names a key of nested objects in v, whatever its value.
func present(v map[string]any, path string) bool {
	keys := strings.Split(path, ".")
	for i, k := range keys {
		child, ok := v[k]
		if !ok {
			return false
		}
		if i == len(keys)-1 {
			return true
		}
		if v, ok = child.(map[string]any); !ok {
			return false
		}
	}
	return false
}

// testSchema has an internal top-level object (etcd) and an internal field inside a public object
// (hosted.platform); its defaults include an int, to show that specs are normalised through JSON.
func testSchema() fakeSchema {
	return fakeSchema{
		internal: []string{"etcd", "hosted.platform"},
		defaults: map[string]any{"region": "eu", "replicas": 3, "etcd": map[string]any{"size": "8Gi"}},
	}
}

func testDescriptor(spec SpecSchema) *Descriptor {
	return &Descriptor{Kind: "Cluster", Plural: "clusters", Table: "clusters", NameMin: 3, NameMax: 10, Spec: spec}
}

// decodeObject parses a JSON object as the service does.
func decodeObject(tb testing.TB, s string) map[string]any {
	tb.Helper()
	var v map[string]any
	require.NoError(tb, json.Unmarshal([]byte(s), &v))
	return v
}

// requireError asserts that err is an *Error with the code and, in order, the fields.
func requireError(tb testing.TB, err error, code Code, fields []string) *Error {
	tb.Helper()
	require.Error(tb, err)
	var e *Error
	require.True(tb, errors.As(err, &e), "want *Error, got %T: %v", err, err)
	require.Equal(tb, code, e.Code, "error: %v", err)
	got := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		got[i] = f.Field
	}
	if fields == nil {
		fields = []string{}
	}
	require.Equal(tb, fields, got)
	return e
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name    string
		min     int
		max     int
		input   string
		wantMsg string // a substring of the one problem; empty means valid
	}{
		{name: "shortest", min: 3, max: 10, input: "abc"},
		{name: "longest", min: 3, max: 10, input: "abcdefghij"},
		{name: "digits and dashes", min: 3, max: 10, input: "a1-b2-3"},
		{name: "all digits", min: 3, max: 10, input: "123"},
		{name: "empty", min: 3, max: 10, input: "", wantMsg: "3 to 10 characters"},
		{name: "too short", min: 3, max: 10, input: "ab", wantMsg: "3 to 10 characters"},
		{name: "too long", min: 3, max: 10, input: "abcdefghijk", wantMsg: "3 to 10 characters"},
		{name: "too long and not a label reports the length only", min: 3, max: 10, input: "ABCDEFGHIJK", wantMsg: "3 to 10 characters"},
		{name: "uppercase", min: 3, max: 10, input: "Abc", wantMsg: "DNS label"},
		{name: "leading dash", min: 3, max: 10, input: "-abc", wantMsg: "DNS label"},
		{name: "trailing dash", min: 3, max: 10, input: "abc-", wantMsg: "DNS label"},
		{name: "underscore", min: 3, max: 10, input: "a_c", wantMsg: "DNS label"},
		{name: "dot", min: 3, max: 10, input: "a.c", wantMsg: "DNS label"},
		{name: "space", min: 3, max: 10, input: "a c", wantMsg: "DNS label"},
		{name: "non-ASCII", min: 3, max: 10, input: "abé", wantMsg: "DNS label"},
		{name: "one-character kind", min: 1, max: 63, input: "a"},
		{name: "63 characters", min: 1, max: 63, input: strings.Repeat("a", 63)},
		{name: "64 characters", min: 1, max: 63, input: strings.Repeat("a", 64), wantMsg: "1 to 63 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Descriptor{Kind: "Cluster", NameMin: tt.min, NameMax: tt.max}
			got := checkName(d, tt.input)
			if tt.wantMsg == "" {
				require.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			require.Equal(t, "name", got[0].Field)
			require.Contains(t, got[0].Message, tt.wantMsg)
		})
	}
}

func TestCheckLabels(t *testing.T) {
	labelsN := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("k%02d", i)] = "v"
		}
		return m
	}
	type problem struct{ field, msg string } // msg is a substring of the message
	keyProblem := func(k string) problem { return problem{"labels." + k, "key must be"} }
	valueProblem := func(k string) problem { return problem{"labels." + k, "value must be at most 255"} }
	tests := []struct {
		name   string
		labels map[string]string
		want   []problem
	}{
		{name: "nil", labels: nil},
		{name: "empty", labels: map[string]string{}},
		{name: "valid keys and values", labels: map[string]string{
			"app": "web", "a": "", "A_b.c-D9": "x", "hyperfleet.io/owner": "team-a", "example.com/a_b": strings.Repeat("v", 255),
		}},
		{name: "63-character key", labels: map[string]string{strings.Repeat("k", 63): "v"}},
		{name: "63-character prefixed key", labels: map[string]string{"example.com/" + strings.Repeat("k", 51): "v"}},
		{name: "64-character key", labels: map[string]string{strings.Repeat("k", 64): "v"}, want: []problem{keyProblem(strings.Repeat("k", 64))}},
		{name: "64-character prefixed key", labels: map[string]string{"example.com/" + strings.Repeat("k", 52): "v"},
			want: []problem{keyProblem("example.com/" + strings.Repeat("k", 52))}},
		{name: "empty key", labels: map[string]string{"": "v"}, want: []problem{keyProblem("")}},
		{name: "leading dash", labels: map[string]string{"-app": "v"}, want: []problem{keyProblem("-app")}},
		{name: "trailing dot", labels: map[string]string{"app.": "v"}, want: []problem{keyProblem("app.")}},
		{name: "leading slash", labels: map[string]string{"/app": "v"}, want: []problem{keyProblem("/app")}},
		{name: "trailing slash", labels: map[string]string{"example.com/": "v"}, want: []problem{keyProblem("example.com/")}},
		{name: "space", labels: map[string]string{"my app": "v"}, want: []problem{keyProblem("my app")}},
		{name: "colon", labels: map[string]string{"app:x": "v"}, want: []problem{keyProblem("app:x")}},
		{name: "non-ASCII", labels: map[string]string{"café": "v"}, want: []problem{keyProblem("café")}},
		{name: "256-character value", labels: map[string]string{"app": strings.Repeat("v", 256)}, want: []problem{valueProblem("app")}},
		{name: "bad key and value of one label", labels: map[string]string{"-app": strings.Repeat("v", 256)},
			want: []problem{keyProblem("-app"), valueProblem("-app")}},
		{name: "64 labels", labels: labelsN(64)},
		{name: "65 labels", labels: labelsN(65), want: []problem{{"labels", "at most 64 labels"}}},
		{name: "the count comes first, then each key in sorted order", labels: func() map[string]string {
			m := labelsN(63)
			m["zz-"], m["-aa"], m["mm"] = "v", "v", strings.Repeat("v", 256)
			return m
		}(), want: []problem{{"labels", "at most 64"}, keyProblem("-aa"), valueProblem("mm"), keyProblem("zz-")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Map order is random: the order of the problems must not be.
			for range 20 {
				got := checkLabels(tt.labels)
				require.Len(t, got, len(tt.want), "problems: %v", got)
				for i, w := range tt.want {
					require.Equal(t, w.field, got[i].Field)
					require.Contains(t, got[i].Message, w.msg)
				}
			}
		})
	}
}

func TestPatchLabels(t *testing.T) {
	tests := []struct {
		name       string
		current    map[string]string
		doc        string
		want       map[string]string
		wantCode   Code
		wantFields []string
	}{
		{name: "set and remove", current: map[string]string{"a": "1", "b": "2"}, doc: `{"a":null,"c":"3","b":"20"}`,
			want: map[string]string{"b": "20", "c": "3"}},
		{name: "empty patch keeps all", current: map[string]string{"a": "1"}, doc: `{}`, want: map[string]string{"a": "1"}},
		{name: "removing an absent key is a no-op", current: map[string]string{"a": "1"}, doc: `{"z":null}`, want: map[string]string{"a": "1"}},
		{name: "remove the last label", current: map[string]string{"a": "1"}, doc: `{"a":null}`, want: map[string]string{}},
		{name: "from no labels", current: nil, doc: `{"a":"1"}`, want: map[string]string{"a": "1"}},
		{name: "empty string is a value, not a removal", current: map[string]string{"a": "1"}, doc: `{"a":""}`, want: map[string]string{"a": ""}},
		{name: "number value", current: map[string]string{"a": "1"}, doc: `{"a":1}`, wantCode: CodeMalformed, wantFields: []string{"labels"}},
		{name: "bool value", doc: `{"a":true}`, wantCode: CodeMalformed, wantFields: []string{"labels"}},
		{name: "object value", doc: `{"a":{"b":"c"}}`, wantCode: CodeMalformed, wantFields: []string{"labels"}},
		{name: "array doc", doc: `["a"]`, wantCode: CodeMalformed, wantFields: []string{"labels"}},
		{name: "string doc", doc: `"a"`, wantCode: CodeMalformed, wantFields: []string{"labels"}},
		{name: "not JSON", doc: `{"a":`, wantCode: CodeMalformed, wantFields: []string{"labels"}},
		{name: "bad key", current: map[string]string{"a": "1"}, doc: `{"bad key":"x"}`, wantCode: CodeInvalid, wantFields: []string{"labels.bad key"}},
		{name: "long value", doc: fmt.Sprintf(`{"a":%q}`, strings.Repeat("v", 256)), wantCode: CodeInvalid, wantFields: []string{"labels.a"}},
		{name: "too many after the patch", current: func() map[string]string {
			m := map[string]string{}
			for i := range 64 {
				m[fmt.Sprintf("k%02d", i)] = "v"
			}
			return m
		}(), doc: `{"k00":null,"x":"1","y":"2"}`, wantCode: CodeInvalid, wantFields: []string{"labels"}},
		{name: "a patch can fix what it removes", current: map[string]string{"a": "1"}, doc: `{"a":null,"b":"2"}`, want: map[string]string{"b": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := make(map[string]string, len(tt.current))
			for k, v := range tt.current {
				before[k] = v
			}
			got, err := patchLabels(tt.current, json.RawMessage(tt.doc))
			if len(tt.current) > 0 {
				require.Equal(t, before, tt.current, "the current labels must not be modified")
			}
			if tt.wantCode != "" {
				_ = requireError(t, err, tt.wantCode, tt.wantFields)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestValueAt(t *testing.T) {
	v := map[string]any{
		"a":    map[string]any{"b": map[string]any{"c": "deep"}, "n": nil},
		"s":    "str",
		"list": []any{map[string]any{"x": 1.0}},
	}
	tests := []struct {
		name string
		v    any
		path string
		want any
	}{
		{name: "top level", v: v, path: "s", want: "str"},
		{name: "nested", v: v, path: "a.b.c", want: "deep"},
		{name: "object", v: v, path: "a.b", want: map[string]any{"c": "deep"}},
		{name: "explicit null", v: v, path: "a.n", want: nil},
		{name: "missing leaf", v: v, path: "a.b.x", want: nil},
		{name: "missing parent", v: v, path: "x.y", want: nil},
		{name: "through a null", v: v, path: "a.n.c", want: nil},
		{name: "through a string", v: v, path: "s.x", want: nil},
		{name: "dot index is a key, not an item", v: v, path: "list.0.x", want: nil},
		{name: "array item", v: v, path: "list[0].x", want: 1.0},
		{name: "array item out of range", v: v, path: "list[1].x", want: nil},
		{name: "bad index", v: v, path: "list[x].x", want: nil},
		{name: "index into an object", v: v, path: "a[0]", want: nil},
		{name: "not an object", v: "str", path: "a", want: nil},
		{name: "nil", v: nil, path: "a", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, valueAt(tt.v, tt.path))
		})
	}
}

func TestChangedInternal(t *testing.T) {
	d := testDescriptor(testSchema())
	stored := `{"name":"a","hosted":{"platform":"kv","dns":"d"},"etcd":{"size":"8Gi"}}`
	tests := []struct {
		name   string
		before string
		after  string
		want   []string
	}{
		{name: "identical", before: stored, after: stored},
		{name: "public fields change", before: stored, after: `{"name":"b","hosted":{"platform":"kv","dns":"e"},"etcd":{"size":"8Gi"}}`},
		{name: "internal object deeply equal", before: stored, after: `{"etcd":{"size":"8Gi"},"hosted":{"dns":"d","platform":"kv"},"name":"a"}`},
		{name: "internal value changes", before: stored, after: `{"name":"a","hosted":{"platform":"none","dns":"d"},"etcd":{"size":"8Gi"}}`,
			want: []string{"hosted.platform"}},
		{name: "inside an internal object", before: stored, after: `{"name":"a","hosted":{"platform":"kv","dns":"d"},"etcd":{"size":"1Gi"}}`,
			want: []string{"etcd"}},
		{name: "internal field removed", before: stored, after: `{"name":"a","hosted":{"platform":"kv","dns":"d"}}`, want: []string{"etcd"}},
		{name: "internal field added", before: `{"name":"a"}`, after: `{"name":"a","etcd":{"size":"8Gi"}}`, want: []string{"etcd"}},
		{name: "parent object nulled away", before: stored, after: `{"name":"a","etcd":{"size":"8Gi"}}`, want: []string{"hosted.platform"}},
		{name: "parent object replaced without the field", before: stored, after: `{"name":"a","hosted":{"dns":"d"},"etcd":{"size":"8Gi"}}`,
			want: []string{"hosted.platform"}},
		{name: "parent object replaced by a scalar", before: stored, after: `{"name":"a","hosted":"x","etcd":{"size":"8Gi"}}`,
			want: []string{"hosted.platform"}},
		{name: "several, sorted and each once", before: stored, after: `{"hosted":{"platform":"none"},"etcd":{"size":"1Gi"}}`,
			want: []string{"etcd", "hosted.platform"}},
		{name: "neither has any", before: `{"name":"a"}`, after: `{"name":"b"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := changedInternal(d, decodeObject(t, tt.before), decodeObject(t, tt.after))
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPrepareSpec(t *testing.T) {
	// stored is a spec as Create leaves it: defaulted.
	const stored = `{"name":"a","region":"us","replicas":3,"tags":{"x":"1","y":"2"},"list":[1,2],` +
		`"hosted":{"platform":"kv","dns":"d"},"etcd":{"size":"8Gi"}}`
	// patched returns stored with top-level members replaced (nil removes them).
	patched := func(tb testing.TB, members map[string]any) string {
		tb.Helper()
		m := decodeObject(tb, stored)
		for k, v := range members {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		raw, err := json.Marshal(m)
		require.NoError(tb, err)
		return string(raw)
	}
	tests := []struct {
		name       string
		schema     SpecSchema // testSchema() when nil
		admin      bool
		old        string // empty: a create
		doc        string // empty: absent
		want       string // the resulting spec as JSON
		wantCode   Code
		wantFields []string
		wantMsg    string
	}{
		// create
		{name: "create without spec gets the defaults", want: `{"region":"eu","replicas":3,"etcd":{"size":"8Gi"}}`},
		{name: "create with null spec gets the defaults", doc: `null`, want: `{"region":"eu","replicas":3,"etcd":{"size":"8Gi"}}`},
		{name: "create keeps given values over defaults", doc: `{"name":"x","region":"us","hosted":{"dns":"d"}}`,
			want: `{"name":"x","region":"us","replicas":3,"hosted":{"dns":"d"},"etcd":{"size":"8Gi"}}`},
		{name: "create: non-admin sets an internal object", doc: `{"etcd":{"size":"1Gi"}}`,
			wantCode: CodeInternalField, wantFields: []string{"spec.etcd"}, wantMsg: "etcd"},
		{name: "create: non-admin sets a nested internal field", doc: `{"hosted":{"platform":"kv"}}`,
			wantCode: CodeInternalField, wantFields: []string{"spec.hosted.platform"}, wantMsg: "hosted.platform"},
		{name: "create: non-admin sends an internal field as null", doc: `{"etcd":null}`,
			wantCode: CodeInternalField, wantFields: []string{"spec.etcd"}},
		{name: "create: every internal field is named", doc: `{"etcd":{},"hosted":{"platform":"kv"}}`,
			wantCode: CodeInternalField, wantFields: []string{"spec.etcd", "spec.hosted.platform"}, wantMsg: "etcd, hosted.platform"},
		{name: "create: admin sets internal fields", admin: true, doc: `{"etcd":{"size":"1Gi"},"hosted":{"platform":"kv"}}`,
			want: `{"region":"eu","replicas":3,"etcd":{"size":"1Gi"},"hosted":{"platform":"kv"}}`},
		{name: "create: array spec", doc: `[1]`, wantCode: CodeMalformed, wantFields: []string{"spec"}},
		{name: "create: string spec", doc: `"x"`, wantCode: CodeMalformed, wantFields: []string{"spec"}},
		{name: "create: not JSON", doc: `{"a":`, wantCode: CodeMalformed, wantFields: []string{"spec"}},
		{name: "create: defaults fail", schema: fakeSchema{defaultsErr: errors.New("boom")}, doc: `{}`,
			wantCode: CodeInvalid, wantMsg: "boom"},

		// merge patch
		{name: "empty patch changes nothing", old: stored, doc: `{}`, want: stored},
		{name: "objects merge", old: stored, doc: `{"tags":{"y":"3","z":"4"}}`,
			want: patched(t, map[string]any{"tags": map[string]any{"x": "1", "y": "3", "z": "4"}})},
		{name: "null removes a nested member", old: stored, doc: `{"tags":{"x":null}}`,
			want: patched(t, map[string]any{"tags": map[string]any{"y": "2"}})},
		{name: "null removes a top-level member", old: stored, doc: `{"name":null}`, want: patched(t, map[string]any{"name": nil})},
		{name: "null on a defaulted member restores the default", old: stored, doc: `{"region":null}`,
			want: patched(t, map[string]any{"region": "eu"})},
		{name: "arrays are replaced", old: stored, doc: `{"list":[3]}`, want: patched(t, map[string]any{"list": []any{3}})},
		{name: "non-admin patches a public sibling of an internal field", old: stored, doc: `{"hosted":{"dns":"e"}}`,
			want: patched(t, map[string]any{"hosted": map[string]any{"platform": "kv", "dns": "e"}})},
		{name: "non-admin names an internal field", old: stored, doc: `{"hosted":{"platform":"none"}}`,
			wantCode: CodeInternalField, wantFields: []string{"spec.hosted.platform"}},
		{name: "non-admin names an internal field with its current value", old: stored, doc: `{"etcd":{"size":"8Gi"}}`,
			wantCode: CodeInternalField, wantFields: []string{"spec.etcd"}},
		{name: "non-admin removes an internal field", old: stored, doc: `{"etcd":null}`,
			wantCode: CodeInternalField, wantFields: []string{"spec.etcd"}},
		{name: "non-admin nulls the parent of an internal field", old: stored, doc: `{"hosted":null}`,
			wantCode: CodeInternalField, wantMsg: "hosted.platform"},
		{name: "non-admin replaces the parent of an internal field with a scalar", old: stored, doc: `{"hosted":"x"}`,
			wantCode: CodeInternalField, wantMsg: "hosted.platform"},
		{name: "non-admin nulls a parent without internal fields", old: `{"hosted":{"dns":"d"},"region":"us","replicas":3,"etcd":{"size":"8Gi"}}`,
			doc: `{"hosted":null}`, want: `{"region":"us","replicas":3,"etcd":{"size":"8Gi"}}`},
		{name: "admin nulls the parent of an internal field", admin: true, old: stored, doc: `{"hosted":null}`,
			want: patched(t, map[string]any{"hosted": nil})},
		{name: "admin changes an internal field", admin: true, old: stored, doc: `{"hosted":{"platform":"none"},"etcd":{"size":"1Gi"}}`,
			want: patched(t, map[string]any{"hosted": map[string]any{"platform": "none", "dns": "d"}, "etcd": map[string]any{"size": "1Gi"}})},
		{name: "admin removes an internal field with a default", admin: true, old: stored, doc: `{"etcd":null}`, want: stored},
		{name: "patch is an array", old: stored, doc: `[{"op":"add"}]`, wantCode: CodeMalformed, wantFields: []string{"spec"}},
		{name: "patch is not JSON", old: stored, doc: `{"tags":`, wantCode: CodeMalformed, wantFields: []string{"spec"}},
		{name: "patch is null", old: stored, doc: `null`, wantCode: CodeMalformed, wantMsg: "JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			schema := tt.schema
			if schema == nil {
				schema = testSchema()
			}
			var old, doc json.RawMessage
			if tt.old != "" {
				old = json.RawMessage(tt.old)
			}
			if tt.doc != "" {
				doc = json.RawMessage(tt.doc)
			}
			got, err := prepareSpec(testDescriptor(schema), Caller{Name: "someone", Admin: tt.admin}, old, doc)
			if tt.wantCode != "" {
				e := requireError(t, err, tt.wantCode, tt.wantFields)
				require.Contains(t, e.Message, tt.wantMsg)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			// decodeObject yields float64 numbers: equality shows that int defaults were normalised too.
			require.Equal(t, decodeObject(t, tt.want), got)
		})
	}
}

// Only an admin may force a change past the kind's transition rules; the service refuses anyone else before it
// reads anything, whatever the HTTP edge checked.
func TestUpdateForceIsForAdmins(t *testing.T) {
	d := &Descriptor{Kind: "Stream", Plural: "streams", Table: "streams", NameMin: 1, NameMax: 63, Spec: fakeSchema{},
		Transition: func(map[string]any, map[string]any) error { return nil }}
	svc := NewService(nil, []*Descriptor{d}) // never reached: the refusal comes first
	ctx := WithCaller(t.Context(), Caller{Name: "pat"})
	_, err := svc.Update(ctx, d, "", "00000000-0000-0000-0000-000000000001", Patch{Spec: json.RawMessage(`{}`), Force: true}, nil)
	require.Equal(t, CodeForbidden, ErrorCode(err), "%v", err)
}

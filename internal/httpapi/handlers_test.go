package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// requireError asserts that err is a *resource.Error with the code and, in order, the fields.
func requireError(tb testing.TB, err error, code resource.Code, fields ...string) *resource.Error {
	tb.Helper()
	require.Error(tb, err)
	var e *resource.Error
	require.True(tb, errors.As(err, &e), "want *resource.Error, got %T: %v", err, err)
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

func listRequest(tb testing.TB, q url.Values) *http.Request {
	tb.Helper()
	target := BasePath + "/clusters"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	return httptest.NewRequest(http.MethodGet, target, http.NoBody)
}

func TestListOptions(t *testing.T) {
	defaults := resource.ListOptions{Page: 1, Size: defaultPageSize}
	with := func(f func(o *resource.ListOptions)) resource.ListOptions {
		o := defaults
		f(&o)
		return o
	}
	fieldSet := func(names ...string) map[string]bool {
		m := map[string]bool{"id": true, "kind": true, "href": true}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	tests := []struct {
		name       string
		query      url.Values
		want       resource.ListOptions
		wantFields map[string]bool
		wantErr    string // the field of a CodeBadListParam error
	}{
		{name: "defaults", want: resource.ListOptions{Page: 1, Size: 20}},
		{name: "empty values are defaults", query: url.Values{"page": {""}, "size": {""}, "order": {" "}, "fields": {" "}}, want: defaults},
		{name: "search passes through", query: url.Values{"search": {"name = 'a' and labels.env = 'prod'"}},
			want: with(func(o *resource.ListOptions) { o.Search = "name = 'a' and labels.env = 'prod'" })},

		// page and size
		{name: "page and size", query: url.Values{"page": {"3"}, "size": {"50"}}, want: with(func(o *resource.ListOptions) { o.Page, o.Size = 3, 50 })},
		{name: "page 1", query: url.Values{"page": {"1"}}, want: defaults},
		{name: "page at its bound", query: url.Values{"page": {"1000000"}}, want: with(func(o *resource.ListOptions) { o.Page = 1_000_000 })},
		{name: "page over its bound", query: url.Values{"page": {"1000001"}}, wantErr: "page"},
		{name: "page 0", query: url.Values{"page": {"0"}}, wantErr: "page"},
		{name: "page negative", query: url.Values{"page": {"-1"}}, wantErr: "page"},
		{name: "page not a number", query: url.Values{"page": {"two"}}, wantErr: "page"},
		{name: "page fractional", query: url.Values{"page": {"1.5"}}, wantErr: "page"},
		{name: "size 1", query: url.Values{"size": {"1"}}, want: with(func(o *resource.ListOptions) { o.Size = 1 })},
		{name: "size at its bound", query: url.Values{"size": {"500"}}, want: with(func(o *resource.ListOptions) { o.Size = maxPageSize })},
		{name: "size over its bound", query: url.Values{"size": {"501"}}, wantErr: "size"},
		{name: "size 0", query: url.Values{"size": {"0"}}, wantErr: "size"},
		{name: "size not a number", query: url.Values{"size": {"all"}}, wantErr: "size"},

		// include_deleted
		{name: "include_deleted true", query: url.Values{"include_deleted": {"true"}}, want: with(func(o *resource.ListOptions) { o.IncludeDeleted = true })},
		{name: "include_deleted 1", query: url.Values{"include_deleted": {"1"}}, want: with(func(o *resource.ListOptions) { o.IncludeDeleted = true })},
		{name: "include_deleted false", query: url.Values{"include_deleted": {"false"}}, want: defaults},
		{name: "include_deleted yes", query: url.Values{"include_deleted": {"yes"}}, wantErr: "include_deleted"},
		// count, count_estimate
		{name: "count false", query: url.Values{"count": {"false"}}, want: with(func(o *resource.ListOptions) { o.NoCount = true })},
		{name: "count estimate is not a count", query: url.Values{"count": {"estimate"}}, wantErr: "count"},
		{name: "count_estimate true", query: url.Values{"count_estimate": {"true"}}, want: with(func(o *resource.ListOptions) { o.EstimateCount = true })},
		{name: "count_estimate false", query: url.Values{"count_estimate": {"false"}}, want: defaults},
		{name: "count_estimate 1", query: url.Values{"count_estimate": {"1"}}, wantErr: "count_estimate"},

		// order
		{name: "order one field", query: url.Values{"order": {"name"}},
			want: with(func(o *resource.ListOptions) { o.Order = []resource.OrderBy{{Field: "name"}} })},
		{name: "order several with directions", query: url.Values{"order": {"created_time desc, name"}},
			want: with(func(o *resource.ListOptions) {
				o.Order = []resource.OrderBy{{Field: "created_time", Desc: true}, {Field: "name"}}
			})},
		{name: "order directions in any case", query: url.Values{"order": {" name ASC ,generation DESC "}},
			want: with(func(o *resource.ListOptions) {
				o.Order = []resource.OrderBy{{Field: "name"}, {Field: "generation", Desc: true}}
			})},
		{name: "order bad direction", query: url.Values{"order": {"name sideways"}}, wantErr: "order"},
		{name: "order too many words", query: url.Values{"order": {"name asc desc"}}, wantErr: "order"},
		{name: "order empty part in the middle", query: url.Values{"order": {"name,,id"}}, wantErr: "order"},
		{name: "order trailing comma", query: url.Values{"order": {"name,"}}, wantErr: "order"},
		{name: "order leading comma", query: url.Values{"order": {",name"}}, wantErr: "order"},
		{name: "order blank part", query: url.Values{"order": {"name, ,id"}}, wantErr: "order"},

		// fields
		{name: "fields always include id, kind and href", query: url.Values{"fields": {"name"}}, want: defaults, wantFields: fieldSet("name")},
		{name: "fields several", query: url.Values{"fields": {"name, labels,status"}}, want: defaults, wantFields: fieldSet("name", "labels", "status")},
		{name: "fields naming the always ones", query: url.Values{"fields": {"id,href"}}, want: defaults, wantFields: fieldSet()},
		{name: "fields unknown", query: url.Values{"fields": {"name,secret"}}, wantErr: "fields"},
		{name: "fields nested", query: url.Values{"fields": {"spec.region"}}, wantErr: "fields"},
		{name: "fields empty part", query: url.Values{"fields": {"name,,labels"}}, wantErr: "fields"},
		{name: "fields case matters", query: url.Values{"fields": {"Name"}}, wantErr: "fields"},

		// pending_for and resync_after
		{name: "pending_for passes through", query: url.Values{"pending_for": {"version-resolver"}},
			want: with(func(o *resource.ListOptions) { o.PendingFor = "version-resolver" })},
		{name: "pending_for is validated by the service, not here", query: url.Values{"pending_for": {"Not A Label"}},
			want: with(func(o *resource.ListOptions) { o.PendingFor = "Not A Label" })},
		{name: "resync_after with pending_for", query: url.Values{"pending_for": {"dns"}, "resync_after": {"5m"}},
			want: with(func(o *resource.ListOptions) { o.PendingFor, o.ResyncAfter = "dns", 5*time.Minute })},
		{name: "resync_after compound", query: url.Values{"resync_after": {"1h30s"}},
			want: with(func(o *resource.ListOptions) { o.ResyncAfter = time.Hour + 30*time.Second })},
		{name: "resync_after zero", query: url.Values{"resync_after": {"0s"}}, wantErr: "resync_after"},
		{name: "resync_after negative", query: url.Values{"resync_after": {"-1m"}}, wantErr: "resync_after"},
		{name: "resync_after without unit", query: url.Values{"resync_after": {"300"}}, wantErr: "resync_after"},
		{name: "resync_after not a duration", query: url.Values{"resync_after": {"soon"}}, wantErr: "resync_after"},

		{name: "everything at once", query: url.Values{
			"page": {"2"}, "size": {"10"}, "search": {"name = 'x'"}, "order": {"name desc"}, "include_deleted": {"true"},
			"pending_for": {"dns"}, "resync_after": {"30s"}, "fields": {"name,generation"},
		}, want: resource.ListOptions{
			Page: 2, Size: 10, Search: "name = 'x'", Order: []resource.OrderBy{{Field: "name", Desc: true}}, IncludeDeleted: true,
			PendingFor: "dns", ResyncAfter: 30 * time.Second,
		}, wantFields: fieldSet("name", "generation")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, fields, err := listOptions(listRequest(t, tt.query))
			if tt.wantErr != "" {
				e := requireError(t, err, resource.CodeBadListParam, tt.wantErr)
				require.Contains(t, e.Message, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, opts)
			require.Equal(t, tt.wantFields, fields)
		})
	}
}

func TestParseIfMatch(t *testing.T) {
	tests := []struct {
		name    string
		header  string
		want    int64 // 0: no precondition
		wantErr bool
	}{
		{name: "quoted, as sent in ETag", header: `"3"`, want: 3},
		{name: "bare number", header: `3`, want: 3},
		{name: "surrounding space", header: `  "7" `, want: 7},
		{name: "large", header: `"9223372036854775807"`, want: 1<<63 - 1},
		{name: "empty", header: ``},
		{name: "blank", header: `   `},
		{name: "weak", header: `W/"3"`, wantErr: true},
		{name: "zero", header: `"0"`, wantErr: true},
		{name: "bare zero", header: `0`, wantErr: true},
		{name: "negative", header: `"-1"`, wantErr: true},
		{name: "not a number", header: `"abc"`, wantErr: true},
		{name: "wildcard", header: `*`, wantErr: true},
		{name: "a list", header: `"3", "4"`, wantErr: true},
		{name: "overflow", header: `"9223372036854775808"`, wantErr: true},
		{name: "fraction", header: `"1.0"`, wantErr: true},
		{name: "empty quotes", header: `""`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseIfMatch(tt.header)
			switch {
			case tt.wantErr:
				_ = requireError(t, err, resource.CodeMalformed, "If-Match")
				require.Nil(t, got)
			case tt.want == 0:
				require.NoError(t, err)
				require.Nil(t, got)
			default:
				require.NoError(t, err)
				require.NotNil(t, got)
				require.Equal(t, tt.want, *got)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantField string // the one field named; empty: none
		wantMsg   string // a substring of the message
	}{
		{name: "wrong type", body: `{"name":5}`, wantField: "name", wantMsg: "name must be string, not number"},
		{name: "wrong type in a map names the map", body: `{"labels":{"env":true}}`, wantField: "labels", wantMsg: "labels must be string, not bool"},
		{name: "wrong container type", body: `{"labels":["a"]}`, wantField: "labels", wantMsg: "labels must be map[string]string, not array"},
		{name: "not an object", body: `[1]`, wantField: "(body)", wantMsg: "(body) must be"},
		{name: "unknown field", body: `{"name":"a","colour":"red"}`, wantField: "colour", wantMsg: `unknown field "colour"`},
		{name: "empty body", body: ``, wantMsg: "the body is empty"},
		{name: "blank body", body: " \n", wantMsg: "the body is empty"},
		{name: "truncated", body: `{"name":`, wantMsg: "not valid JSON"},
		{name: "syntax error", body: `{name: "a"}`, wantMsg: "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Produce the error the way decodeStrict does, so the test follows encoding/json's real errors.
			dec := json.NewDecoder(strings.NewReader(tt.body))
			dec.DisallowUnknownFields()
			var body createBody
			decodeErr := dec.Decode(&body)
			require.Error(t, decodeErr)

			var fields []string
			if tt.wantField != "" {
				fields = []string{tt.wantField}
			}
			e := requireError(t, malformed(decodeErr), resource.CodeMalformed, fields...)
			require.Contains(t, e.Message, tt.wantMsg)
		})
	}

	t.Run("wrapped errors are recognised", func(t *testing.T) {
		e := requireError(t, malformed(fmt.Errorf("decode: %w", io.EOF)), resource.CodeMalformed)
		require.Contains(t, e.Message, "the body is empty")

		typeErr := &json.UnmarshalTypeError{Value: "number", Type: reflect.TypeFor[string](), Field: "spec.region"}
		e = requireError(t, malformed(fmt.Errorf("decode: %w", typeErr)), resource.CodeMalformed, "spec.region")
		require.Equal(t, "must be string", e.Fields[0].Message)
	})
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		want      createBody
		wantCode  resource.Code
		wantField string
	}{
		{name: "valid", body: `{"name":"a","labels":{"k":"v"},"spec":{"x":1}}`,
			want: createBody{Name: "a", Labels: map[string]string{"k": "v"}, Spec: json.RawMessage(`{"x":1}`)}},
		{name: "trailing whitespace", body: "{\"name\":\"a\"}\n", want: createBody{Name: "a"}},
		{name: "two objects", body: `{"name":"a"} {"name":"b"}`, wantCode: resource.CodeMalformed},
		{name: "unknown field", body: `{"nme":"a"}`, wantCode: resource.CodeMalformed, wantField: "nme"},
		{name: "empty", body: ``, wantCode: resource.CodeMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, BasePath+"/clusters", strings.NewReader(tt.body))
			var got createBody
			err := decodeStrict(req, &got)
			if tt.wantCode != "" {
				var fields []string
				if tt.wantField != "" {
					fields = []string{tt.wantField}
				}
				_ = requireError(t, err, tt.wantCode, fields...)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	t.Run("over the body limit", func(t *testing.T) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, BasePath+"/clusters", strings.NewReader(`{"name":"abcdefgh"}`))
		req.Body = http.MaxBytesReader(rec, req.Body, 8)
		var got createBody
		_ = requireError(t, decodeStrict(req, &got), resource.CodeTooLarge)
	})
}

func TestProject(t *testing.T) {
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	deleted := created.Add(time.Hour)
	item := resourceJSON{
		ID: "0197", Kind: "Cluster", Name: "prod", Href: BasePath + "/clusters/0197", Labels: json.RawMessage(`{"env":"prod"}`),
		Spec: json.RawMessage(`{"region":"eu"}`), Generation: 4, Status: statusJSON{Phase: conditions.PhaseReady, Conditions: json.RawMessage(`[]`)},
		CreatedTime: created, UpdatedTime: created, CreatedBy: "alice", UpdatedBy: "bob", DeletedTime: &deleted, DeletedBy: "carol",
	}
	tests := []struct {
		name   string
		item   resourceJSON
		fields map[string]bool
		want   map[string]string // member → its JSON
	}{
		{name: "the always-present members", item: item, fields: map[string]bool{"id": true, "kind": true, "href": true},
			want: map[string]string{"id": `"0197"`, "kind": `"Cluster"`, "href": `"/api/hyperfleet/v1/clusters/0197"`}},
		{name: "selected members", item: item, fields: map[string]bool{"id": true, "labels": true, "spec": true, "generation": true, "deleted_time": true},
			want: map[string]string{"id": `"0197"`, "labels": `{"env":"prod"}`, "spec": `{"region":"eu"}`, "generation": `4`,
				"deleted_time": `"2025-06-01T13:00:00Z"`}},
		{name: "false entries are not selected", item: item, fields: map[string]bool{"id": true, "name": false},
			want: map[string]string{"id": `"0197"`}},
		{name: "omitted members stay omitted", item: resourceJSON{ID: "1"}, fields: map[string]bool{"id": true, "deleted_time": true, "owner_references": true},
			want: map[string]string{"id": `"1"`}},
		{name: "unknown names select nothing", item: item, fields: map[string]bool{"bogus": true}, want: map[string]string{}},
		{name: "nil selects nothing", item: item, fields: nil, want: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := project(tt.item, tt.fields)
			require.NoError(t, err)
			gotJSON := make(map[string]string, len(got))
			for k, v := range got {
				gotJSON[k] = string(v)
			}
			require.Equal(t, tt.want, gotJSON)
		})
	}

	t.Run("with the fields parsed from a query", func(t *testing.T) {
		_, fields, err := listOptions(listRequest(t, url.Values{"fields": {"name,status"}}))
		require.NoError(t, err)
		got, err := project(item, fields)
		require.NoError(t, err)
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		require.ElementsMatch(t, []string{"id", "kind", "href", "name", "status"}, keys)
		require.JSONEq(t, `{"phase":"Ready","conditions":[]}`, string(got["status"]))
	})
}

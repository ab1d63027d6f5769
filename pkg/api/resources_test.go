package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// recorder is a doer that keeps the requests it is given and answers 204.
type recorder struct{ reqs []seen }

type seen struct {
	Method, URL string
	Header      http.Header
	Body        string
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	r.reqs = append(r.reqs, seen{Method: req.Method, URL: req.URL.String(), Header: req.Header, Body: string(body)})
	return &http.Response{StatusCode: http.StatusNoContent, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}}, nil
}

// The generic client's request for a kind is the request the generated client makes with that kind's own
// operation: same method, URL (path and every list parameter), headers and body. The kinds' operations are found
// by name (List<Name>s, Get<Name>, …) so that a kind added to the table and the document is checked too.
func TestGenericRequestsAreTheGeneratedOnes(t *testing.T) {
	const server = "http://api.test:8000/prefix"
	editor := api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer t")
		return nil
	})
	params := &api.ListParams{
		Page: ptr(2), Size: ptr(50), After: ptr("cursor=="), Count: ptr(false), CountEstimate: ptr(true), Search: ptr("name = 'a b'"),
		Order: ptr("name desc"), Fields: ptr("id,name"), IncludeDeleted: ptr(true), PendingFor: ptr("applier"),
		ResyncAfter: ptr("5m"), Watch: ptr(true), ResourceVersion: ptr("12"), LastEventID: ptr("14"),
	}
	patch := &api.PatchParams{IfMatch: ptr(`"7"`)}
	history := &api.HistoryParams{After: ptr[int64](41), Size: ptr(10)}
	report := api.AdapterStatusReport{Adapter: "a", ObservedGeneration: 3, ObservedTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Conditions: []api.ReportedCondition{{Type: "Available", Status: api.ReportedConditionStatusTrue}}}
	parent, id := uuid.New(), uuid.New()
	ctx := context.Background()

	for _, k := range api.Kinds().All() {
		t.Run(k.Name, func(t *testing.T) {
			var generic, generated recorder
			g, err := api.NewClient(server, api.WithHTTPClient(&generic), editor)
			require.NoError(t, err)
			o, err := api.NewClient(server, api.WithHTTPClient(&generated), editor)
			require.NoError(t, err)
			ref := api.ResourceRef{ID: id}
			ids := []any{id} // the generated operations' path arguments
			if k.Parent != nil {
				ref.Parent = parent
				ids = []any{parent, id}
			}
			body := func() io.Reader { return bytes.NewReader([]byte(`{"name":"x","spec":{}}`)) }
			type call struct {
				name    string
				generic func() (*http.Response, error)
				method  string // the generated operation
				args    []any
			}
			calls := []call{
				{"list", func() (*http.Response, error) { return g.ListResources(ctx, k, uuid.Nil, params) }, "List" + k.Name + "s", []any{params}},
				{"get", func() (*http.Response, error) { return g.GetResource(ctx, k, ref) }, "Get" + k.Name, ids},
				{"patch", func() (*http.Response, error) {
					return g.PatchResourceWithBody(ctx, k, ref, patch, "application/merge-patch+json", body())
				}, "Patch" + k.Name + "WithBody", append(append([]any{}, ids...), patch, "application/merge-patch+json", body())},
				{"delete", func() (*http.Response, error) { return g.DeleteResource(ctx, k, ref) }, "Delete" + k.Name, ids},
				{"force delete", func() (*http.Response, error) { return g.ForceDeleteResource(ctx, k, ref) }, "ForceDelete" + k.Name, ids},
				{"statuses", func() (*http.Response, error) { return g.ListResourceStatuses(ctx, k, ref) }, "List" + k.Name + "Statuses", ids},
				{"history", func() (*http.Response, error) { return g.ListResourceHistory(ctx, k, ref, history) }, "List" + k.Name + "History", append(append([]any{}, ids...), history)},
				{"put status", func() (*http.Response, error) { return g.PutResourceStatus(ctx, k, ref, report) }, "Put" + k.Name + "Status", append(append([]any{}, ids...), report)},
			}
			create := call{"create", func() (*http.Response, error) {
				return g.CreateResourceWithBody(ctx, k, uuid.Nil, "application/json", body())
			}, "Create" + k.Name + "WithBody", []any{(*api.CreateClusterParams)(nil), "application/json", body()}}
			if k.Parent != nil {
				create.generic = func() (*http.Response, error) {
					return g.CreateResourceWithBody(ctx, k, parent, "application/json", body())
				}
				create.args = append([]any{parent}, create.args...)
				calls = append(calls, call{"list under parent", func() (*http.Response, error) { return g.ListResources(ctx, k, parent, params) },
					"List" + k.Parent.Name + k.Name + "s", []any{parent, params}})
			}
			calls = append(calls, create)
			for _, c := range calls {
				_, err := c.generic()
				require.NoError(t, err, c.name)
				callGenerated(t, o, c.method, ctx, c.args)
				require.Equal(t, generated.reqs[len(generated.reqs)-1], generic.reqs[len(generic.reqs)-1], "%s of %s", c.name, k.Name)
			}
		})
	}
}

// callGenerated calls the generated client's method by name, converting each argument to the parameter's type
// (every kind's parameter structs have the same fields).
func callGenerated(t *testing.T, c *api.Client, method string, ctx context.Context, args []any) { //nolint:revive // t first, as in every helper
	t.Helper()
	m := reflect.ValueOf(c).MethodByName(method)
	require.True(t, m.IsValid(), "the generated client has no %s: a kind's operations must be named as the others'", method)
	in := []reflect.Value{reflect.ValueOf(ctx)}
	for i, a := range args {
		in = append(in, reflect.ValueOf(a).Convert(m.Type().In(i+1)))
	}
	out := m.Call(in)
	require.Nil(t, out[1].Interface(), method)
}

// The kind table agrees with openapi.yaml: each kind has its spec schema, its create schema with the table's name
// bounds, and its paths; and the table is well formed.
func TestKindsAgreeWithTheDocument(t *testing.T) {
	kinds := api.Kinds()
	require.NoError(t, kinds.Check())
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document())
	require.NoError(t, err)
	for _, k := range kinds.All() {
		require.Contains(t, doc.Components.Schemas, k.SpecSchema, k.Name)
		create := doc.Components.Schemas[k.Name+"Create"]
		require.NotNil(t, create, "%sCreate", k.Name)
		name := create.Value.Properties["name"].Value
		require.Equal(t, uint64(k.NameMin), name.MinLength, "%s name", k.Name)
		require.Equal(t, uint64(k.NameMax), *name.MaxLength, "%s name", k.Name)
		require.NotNil(t, doc.Paths.Find(api.BasePath+k.CollectionPath(uuid.Nil)), k.Name)
		if k.Parent != nil {
			require.NotNil(t, doc.Paths.Find(api.BasePath+"/"+k.Parent.Plural+"/{"+k.Parent.Singular+"_id}/"+k.Plural), k.Name)
		}
		for _, r := range k.References {
			spec := doc.Components.Schemas[k.SpecSchema].Value
			require.Contains(t, spec.Properties, r.Field, "%s references %s", k.Name, r.Field)
		}
	}
}

func TestKindTable(t *testing.T) {
	kinds := api.Kinds()
	for _, word := range []string{"NodePool", "nodepool", "NODEPOOLS", "np"} {
		require.Same(t, kinds.NodePool, kinds.Lookup(word), word)
	}
	require.Nil(t, kinds.Lookup("pods"))
	require.Same(t, kinds.Cluster, kinds.NodePool.Parent)
	require.NotSame(t, api.Kinds().Cluster, kinds.Cluster, "each call builds a table of its own")

	r := api.ResourceRef{Parent: uuid.MustParse("00000000-0000-0000-0000-000000000001"), ID: uuid.MustParse("00000000-0000-0000-0000-000000000002")}
	require.Equal(t, "/clusters/00000000-0000-0000-0000-000000000001/nodepools/00000000-0000-0000-0000-000000000002", kinds.NodePool.ResourcePath(r))
	require.Equal(t, "/nodepools", kinds.NodePool.CollectionPath(uuid.Nil))
	require.Equal(t, "/clusters/00000000-0000-0000-0000-000000000002", kinds.Cluster.ResourcePath(api.ResourceRef{ID: r.ID}))

	widget := &api.Kind{Name: "Widget", Singular: "widget", Plural: "widgets", Short: "wd", NameMin: 1, NameMax: 20, SpecSchema: "WidgetSpec"}
	more := kinds.With(widget)
	require.NoError(t, more.Check())
	require.Same(t, widget, more.Lookup("wd"))
	require.Nil(t, kinds.Lookup("wd"), "With leaves the table it was called on alone")

	for _, tc := range []struct {
		name string
		kind *api.Kind
		want string
	}{
		{"a word two kinds share", &api.Kind{Name: "Clusterish", Singular: "clusterish", Plural: "clusterishes", Short: "cl", NameMin: 1, NameMax: 9, SpecSchema: "S"}, "both called"},
		{"a parent outside the table", &api.Kind{Name: "Leaf", Singular: "leaf", Plural: "leaves", Short: "lf", NameMin: 1, NameMax: 9, SpecSchema: "S", Parent: &api.Kind{Name: "X"}}, "parent"},
		{"a child of a child", &api.Kind{Name: "Leaf", Singular: "leaf", Plural: "leaves", Short: "lf", NameMin: 1, NameMax: 9, SpecSchema: "S", Parent: kinds.NodePool}, "parent"},
		{"a reference to a child", &api.Kind{Name: "Leaf", Singular: "leaf", Plural: "leaves", Short: "lf", NameMin: 1, NameMax: 9, SpecSchema: "S",
			References: []api.Reference{{Field: "pool", Kind: kinds.NodePool}}}, "reference"},
		{"name bounds", &api.Kind{Name: "Leaf", Singular: "leaf", Plural: "leaves", Short: "lf", NameMin: 0, NameMax: 9, SpecSchema: "S"}, "name length"},
		{"a column without a path", &api.Kind{Name: "Leaf", Singular: "leaf", Plural: "leaves", Short: "lf", NameMin: 1, NameMax: 9, SpecSchema: "S",
			Columns: []api.Column{{Header: "X", JSONPath: ".spec.x"}}}, "JSONPath"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, kinds.With(tc.kind).Check(), tc.want)
		})
	}
}

func ptr[T any](v T) *T { return &v }

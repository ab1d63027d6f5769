package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// widgetSpec is the throwaway kind's spec schema, as openapi.yaml would hold it.
const widgetSpec = `    WidgetSpec:
      type: object
      additionalProperties: false
      required: [color]
      properties:
        color: {type: string, enum: [red, green, blue]}
        size: {type: integer, minimum: 1, default: 1}
`

// Adding a kind is its Kind in the table, its spec schema in the document and a migration from the table template,
// nothing else: a kind this test makes up is served by the API (validated by its schema, defaulted, stored), the
// CLI creates, gets and lists it with its own columns, and a runtime Reconciler reports on it until it is Ready.
func TestAThrowawayKindIsServedEverywhere(t *testing.T) {
	t.Parallel()
	widget := &api.Kind{Name: "Widget", Singular: "widget", Plural: "widgets", Short: "wd", NameMin: 1, NameMax: 30,
		SpecSchema: "WidgetSpec", Columns: []api.Column{{Header: "COLOR", JSONPath: "{.spec.color}"}, {Header: "SIZE", JSONPath: "{.spec.size}", Wide: true}}}
	kinds := api.Kinds().With(widget)
	doc := strings.Replace(string(openapi.Document()), "\n  schemas:\n", "\n  schemas:\n"+widgetSpec, 1)
	require.Contains(t, doc, "WidgetSpec:")

	const maker = "widget-maker"
	s := startAPIWith(t, false, func(cfg *server.Config) {
		require.NoError(t, postgres.Migrate(t.Context(), harness.OpenGorm(t, cfg.DB.URL), postgres.KindTableMigration("test_widgets", "widgets", "")))
		cfg.Kinds, cfg.OpenAPI = kinds, []byte(doc)
		cfg.RequiredAdapters["widget"] = []string{maker}
	})
	c := newCLI(t, s)
	c.kinds = kinds

	// The CLI knows the kind from the table: help, create, get, list.
	require.Contains(t, c.ok(t, "--help"), "widgets (wd)")
	require.Equal(t, "widget/w1 created\n", c.ok(t, "create", "widget", "w1", "--spec", `{"color": "blue"}`))
	require.Contains(t, c.fails(t, exitError, "create", "wd", "w2", "--spec", `{"color": "mauve"}`), "HYPERFLEET-VAL-", "the schema is the kind's")
	require.Regexp(t, `^NAME\s+COLOR\s+PHASE\s+GENERATION\s+AGE\nw1\s+blue\s+Pending\s+1\s+\d+s\n$`, c.ok(t, "get", "widgets"))
	require.Regexp(t, `(?m)^w1\s+blue\s+1\s+Pending\s+1\s+`, c.ok(t, "list", "wd", "-o", "wide"), "the default filled in, in the wide column")
	var got api.Resource
	require.NoError(t, json.Unmarshal([]byte(c.ok(t, "get", "widget", "w1", "-o", "json")), &got))
	require.Equal(t, "Widget", got.Kind)
	require.Equal(t, "/api/hyperfleet/v1/widgets/"+got.Id.String(), got.Href)

	// The runtime serves it: a Reconciler is called for the widget and its report makes it Ready.
	cfg := adapter.Defaults(maker, "127.0.0.1:0")
	cfg.APIURL, cfg.PollInterval, cfg.DrainTimeout = s.url, 100*time.Millisecond, 5*time.Second
	runner, err := adapter.New(cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	require.NoError(t, err)
	seen := make(chan string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx, adapter.Controller{Kind: widget, Reconciler: widgetMaker{seen: seen}}) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case name := <-seen:
		require.Equal(t, "w1", name)
	case <-time.After(15 * time.Second):
		require.FailNow(t, "the runtime never reconciled the widget")
	}
	require.Equal(t, "widget/w1 condition met\n", c.ok(t, "wait", "widget", "w1", "--for=phase=Ready", "--timeout", "15s", "--interval", "50ms"))
	require.Regexp(t, `(?m)^widget-maker\s+1\s+True\s+`, c.ok(t, "statuses", "wd", "w1"))
}

// widgetMaker is the throwaway kind's adapter: it reads the widget's spec and says it is available.
type widgetMaker struct{ seen chan<- string }

func (w widgetMaker) Reconcile(_ context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	var spec struct{ Color string }
	if err := json.Unmarshal(obj.Spec, &spec); err != nil || spec.Color == "" {
		return adapter.Outcome{}, adapter.Terminalf("BadSpec", "spec %s: %v", obj.Spec, err)
	}
	w.seen <- obj.Name
	return adapter.Outcome{Available: conditions.Reported{Status: conditions.True, Reason: "Made", Message: "a " + spec.Color + " widget"}}, nil
}

func (widgetMaker) Finalize(context.Context, *adapter.Object) (adapter.Outcome, error) {
	return adapter.Outcome{Finalized: true}, nil
}

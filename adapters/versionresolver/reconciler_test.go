package versionresolver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// fakeGraphs answers every Graph call with graph and err, and records what it was asked.
type fakeGraphs struct {
	graph *cincinnati.Graph
	err   error
	asked []string // "channel/arch"
}

func (f *fakeGraphs) Graph(_ context.Context, channel, arch string) (*cincinnati.Graph, error) {
	f.asked = append(f.asked, channel+"/"+arch)
	return f.graph, f.err
}

func streamObject(spec string) *adapter.Object {
	return &adapter.Object{Kind: "VersionStream", ID: "vs-1", Name: "ocp-4-16", Generation: 1, Spec: json.RawMessage(spec)}
}

func TestReconcilerCheck(t *testing.T) {
	tests := []struct {
		name    string
		r       *Reconciler
		wantErr bool
	}{
		{name: "no graph source", r: &Reconciler{}, wantErr: true},
		{name: "graph source", r: &Reconciler{Graphs: &fakeGraphs{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Check()
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestStreamOf(t *testing.T) {
	tests := []struct {
		name      string
		spec      string
		want      Stream
		wantErr   bool
		wantErrIs error // checked when set
	}{
		{
			name: "defaults",
			spec: `{"target_version":"4.16"}`,
			want: Stream{Target: "4.16", Channel: "stable-4.16", Arch: "amd64"},
		},
		{
			name: "candidate allows pre-releases",
			spec: `{"target_version":"4.17","channel_group":"candidate"}`,
			want: Stream{Target: "4.17", Channel: "candidate-4.17", Arch: "amd64", AllowPrerelease: true},
		},
		{
			name: "fast on arm64",
			spec: `{"target_version":"4.17","channel_group":"fast","arch":"arm64"}`,
			want: Stream{Target: "4.17", Channel: "fast-4.17", Arch: "arm64"},
		},
		{
			name: "eus on multi",
			spec: `{"target_version":"4.16","channel_group":"eus","arch":"multi"}`,
			want: Stream{Target: "4.16", Channel: "eus-4.16", Arch: "multi"},
		},
		{name: "invalid arch", spec: `{"target_version":"4.16","arch":"x86_64"}`, wantErr: true, wantErrIs: cincinnati.ErrInvalidArch},
		{name: "target with patch", spec: `{"target_version":"4.16.3"}`, wantErr: true, wantErrIs: cincinnati.ErrInvalidTarget},
		{name: "no target", spec: `{}`, wantErr: true, wantErrIs: cincinnati.ErrInvalidTarget},
		{name: "not JSON", spec: `{"target_version":`, wantErr: true},
		{name: "wrong type", spec: `{"target_version":4.16}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := streamOf(json.RawMessage(tt.spec))
			if tt.wantErr {
				require.Error(t, err)
				if tt.wantErrIs != nil {
					require.ErrorIs(t, err, tt.wantErrIs)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestReconcileRequeue(t *testing.T) {
	unavailable := fmt.Errorf("%w: connection refused", cincinnati.ErrUnavailable)
	tests := []struct {
		name    string
		r       Reconciler
		graph   *cincinnati.Graph
		err     error
		want    time.Duration
		wantErr error
	}{
		{name: "resolved, default", graph: graphOf("amd64", "4.16.3"), want: 5 * time.Minute},
		{name: "resolved, configured", r: Reconciler{RecheckAfter: 7 * time.Minute, RetryAfter: 20 * time.Second},
			graph: graphOf("amd64", "4.16.3"), want: 7 * time.Minute},
		{name: "failed, default", err: unavailable, want: time.Minute, wantErr: adapter.ErrTransient},
		{name: "failed, configured", r: Reconciler{RecheckAfter: 7 * time.Minute, RetryAfter: 20 * time.Second},
			err: unavailable, want: 20 * time.Second, wantErr: adapter.ErrTransient},
		{name: "not found, default", graph: graphOf("amd64", "4.15.9"), want: time.Minute, wantErr: adapter.ErrTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			r.Graphs = &fakeGraphs{graph: tt.graph, err: tt.err}
			out, err := r.Reconcile(t.Context(), streamObject(`{"target_version":"4.16"}`))
			requireClass(t, err, tt.wantErr)
			requireAbout(t, tt.want, out.RequeueAfter)
		})
	}
}

func TestReconcileAsksForTheStreamsChannelAndArch(t *testing.T) {
	graphs := &fakeGraphs{graph: graphOf("arm64", "4.17.2")}
	r := &Reconciler{Graphs: graphs}
	_, err := r.Reconcile(t.Context(), streamObject(`{"target_version":"4.17","channel_group":"fast","arch":"arm64"}`))
	require.NoError(t, err)
	require.Equal(t, []string{"fast-4.17/arm64"}, graphs.asked)
}

func TestReconcileResolvedTime(t *testing.T) {
	// A clock with sub-second precision and a zone: resolved_time is reported in UTC seconds, so that re-reading it
	// from the report gives back the same instant.
	clock := time.Date(2024, 6, 1, 14, 0, 0, 999_999_999, time.FixedZone("CEST", 2*60*60))
	r := &Reconciler{Graphs: &fakeGraphs{graph: graphOf("amd64", "4.16.3")}, Now: func() time.Time { return clock }}
	out, err := r.Reconcile(t.Context(), streamObject(`{"target_version":"4.16"}`))
	require.NoError(t, err)
	require.Equal(t, "2024-06-01T12:00:00Z", out.Data["resolved_time"])
}

func TestReconcileKeepsTheLastReportedImage(t *testing.T) {
	r := &Reconciler{Graphs: &fakeGraphs{err: fmt.Errorf("%w: HTTP 503", cincinnati.ErrUnavailable)}}
	obj := streamObject(`{"target_version":"4.16"}`)
	obj.LastReport = &adapter.Report{Data: dataOf(stable416, "4.16.5", earlier)}

	out, err := r.Reconcile(t.Context(), obj)
	requireClass(t, err, adapter.ErrTransient)
	require.Equal(t, map[string]cond{
		"Available":     {conditions.True, ReasonImageKnown},
		"ImageResolved": {conditions.False, ReasonCincinnatiUnavailable},
	}, conditionsOf(t, out))
	require.Equal(t, dataOf(stable416, "4.16.5", earlier), out.Data)
}

func TestReconcileInvalidSpec(t *testing.T) {
	invalid := cond{conditions.False, ReasonInvalidSpec}
	tests := []struct {
		name string
		spec string
	}{
		{name: "not JSON", spec: `{"target_version":`},
		{name: "invalid arch", spec: `{"target_version":"4.16","arch":"i386"}`},
		{name: "invalid target", spec: `{"target_version":"latest"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			graphs := &fakeGraphs{graph: graphOf("amd64", "4.16.3")}
			r := &Reconciler{Graphs: graphs}
			out, err := r.Reconcile(t.Context(), streamObject(tt.spec))
			requireClass(t, err, adapter.ErrTerminal)
			require.Equal(t, map[string]cond{"Available": invalid, "ImageResolved": invalid}, conditionsOf(t, out))
			require.Nil(t, out.Data)
			require.Empty(t, graphs.asked, "an invalid spec must not cost a Cincinnati request")
		})
	}
}

func TestFinalize(t *testing.T) {
	graphs := &fakeGraphs{}
	r := &Reconciler{Graphs: graphs}
	obj := streamObject(`{"target_version":"4.16"}`)
	deleted := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	obj.DeletedTime = &deleted

	out, err := r.Finalize(t.Context(), obj)
	require.NoError(t, err)
	require.True(t, out.Finalized)
	require.Empty(t, graphs.asked)
}

// TestReconcileAgainstSimulator follows one stream through a simulated Cincinnati over HTTP: a first resolution, a
// re-check that finds nothing new, a new patch, the patch pulled, and an outage.
func TestReconcileAgainstSimulator(t *testing.T) {
	sim := cincinnatisim.New()
	require.NoError(t, sim.AddSeries(cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 11}))
	srv := sim.Start()
	defer srv.Close()

	clock := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	r := &Reconciler{Graphs: cincinnati.NewClient(srv.URL, nil), Now: func() time.Time { return clock }}
	obj := streamObject(`{"target_version":"4.16"}`)
	reconcile := func(tb testing.TB) (adapter.Outcome, error) {
		tb.Helper()
		out, err := r.Reconcile(tb.Context(), obj)
		// The runtime hands the reconciler its previous report back, data included.
		obj.LastReport = &adapter.Report{Data: out.Data}
		return out, err
	}
	first := clock

	// stable-4.16 holds 4.15.0–4.15.10 and 4.16.0–4.16.10.
	out, err := reconcile(t)
	require.NoError(t, err)
	require.Equal(t, dataOf(stable416, "4.16.10", first), out.Data)
	require.Equal(t, cincinnatisim.PayloadFor("4.16.10", "amd64"), out.Data["release_image"])
	requireAbout(t, DefaultRecheckAfter, out.RequeueAfter)

	clock = clock.Add(5 * time.Minute)
	out, err = reconcile(t)
	require.NoError(t, err)
	require.Equal(t, dataOf(stable416, "4.16.10", first), out.Data, "a re-check finding the same version keeps resolved_time")

	clock = clock.Add(5 * time.Minute)
	published := clock
	require.NoError(t, sim.Publish("stable-4.16", "amd64", "4.16.11", ""))
	out, err = reconcile(t)
	require.NoError(t, err)
	require.Equal(t, dataOf(stable416, "4.16.11", published), out.Data)

	clock = clock.Add(5 * time.Minute)
	require.True(t, sim.Remove("stable-4.16", "amd64", "4.16.11"))
	out, err = reconcile(t)
	require.NoError(t, err)
	require.Equal(t, dataOf(stable416, "4.16.11", published), out.Data, "the resolver never moves backwards")
	require.Equal(t, cond{conditions.False, ReasonRemovedFromGraph}, conditionsOf(t, out)["ResolvedVersionInGraph"])

	clock = clock.Add(5 * time.Minute)
	require.NoError(t, sim.SetFault(cincinnatisim.Fault{Kind: cincinnatisim.FaultServerError, Count: 1}))
	out, err = reconcile(t)
	requireClass(t, err, adapter.ErrTransient)
	require.ErrorIs(t, err, cincinnati.ErrUnavailable)
	require.Equal(t, map[string]cond{
		"Available":     {conditions.True, ReasonImageKnown},
		"ImageResolved": {conditions.False, ReasonCincinnatiUnavailable},
	}, conditionsOf(t, out))
	require.Equal(t, dataOf(stable416, "4.16.11", published), out.Data)
	requireAbout(t, DefaultRetryAfter, out.RequeueAfter)
}

func TestReconcileUnknownChannelAgainstSimulator(t *testing.T) {
	sim := cincinnatisim.New()
	require.NoError(t, sim.AddSeries(cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 11}))
	srv := sim.Start()
	defer srv.Close()

	r := &Reconciler{Graphs: cincinnati.NewClient(srv.URL, nil)}
	out, err := r.Reconcile(t.Context(), streamObject(`{"target_version":"4.18"}`))
	requireClass(t, err, adapter.ErrTransient)
	require.ErrorIs(t, err, cincinnati.ErrRejected)
	require.Equal(t, map[string]cond{
		"Available":     {conditions.False, ReasonResolutionFailed},
		"ImageResolved": {conditions.False, ReasonResolutionFailed},
	}, conditionsOf(t, out))
	requireAbout(t, DefaultRetryAfter, out.RequeueAfter)
}

// requireAbout checks a re-check delay: the resolver spreads them by ±10 %.
func requireAbout(tb testing.TB, want, got time.Duration) {
	tb.Helper()
	require.GreaterOrEqual(tb, got, want*9/10)
	require.LessOrEqual(tb, got, want*11/10)
}

// TestReconcileLogsEachMoveToANewRelease follows one stream through a simulated Cincinnati and reads the resolver's
// JSON log: a line when the stream first resolves and when a new patch moves it, none when a re-check, a pulled
// release or an outage leaves it where it was.
func TestReconcileLogsEachMoveToANewRelease(t *testing.T) {
	sim := cincinnatisim.New()
	require.NoError(t, sim.AddSeries(cincinnatisim.Series{Minors: []string{"4.16"}, Patches: 11}))
	srv := sim.Start()
	defer srv.Close()

	var logs bytes.Buffer
	r := &Reconciler{Graphs: cincinnati.NewClient(srv.URL, nil), Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	obj := streamObject(`{"target_version":"4.16"}`)
	move := func(oldVersion, newVersion string) map[string]any {
		line := map[string]any{"level": "INFO", "msg": "version stream moved to a new release", "stream": obj.Name,
			"id": obj.ID, "channel": "stable-4.16", "arch": "amd64", "old_version": oldVersion, "new_version": newVersion,
			"old_image": "", "new_image": cincinnatisim.PayloadFor(newVersion, "amd64")}
		if oldVersion != "" {
			line["old_image"] = cincinnatisim.PayloadFor(oldVersion, "amd64")
		}
		return line
	}
	tests := []struct {
		name    string
		before  func(tb testing.TB)
		want    []map[string]any
		wantErr error
	}{
		{name: "first resolution", want: []map[string]any{move("", "4.16.10")}},
		{name: "re-check finds the same release"},
		{name: "a new patch is published", before: func(tb testing.TB) {
			tb.Helper()
			require.NoError(tb, sim.Publish("stable-4.16", "amd64", "4.16.11", ""))
		}, want: []map[string]any{move("4.16.10", "4.16.11")}},
		{name: "the patch is pulled", before: func(tb testing.TB) {
			tb.Helper()
			require.True(tb, sim.Remove("stable-4.16", "amd64", "4.16.11"))
		}},
		{name: "Cincinnati fails", before: func(tb testing.TB) {
			tb.Helper()
			require.NoError(tb, sim.SetFault(cincinnatisim.Fault{Kind: cincinnatisim.FaultServerError, Count: 1}))
		}, wantErr: adapter.ErrTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.before != nil {
				tt.before(t)
			}
			logs.Reset()
			out, err := r.Reconcile(t.Context(), obj)
			requireClass(t, err, tt.wantErr)
			// The runtime hands the reconciler its previous report back, data included.
			obj.LastReport = &adapter.Report{Data: out.Data}
			var got []map[string]any
			for _, line := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
				if len(line) == 0 {
					continue
				}
				var entry map[string]any
				require.NoError(t, json.Unmarshal(line, &entry), "a JSON log line: %s", line)
				delete(entry, "time")
				got = append(got, entry)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// conditionsOf turns a report's conditions back into the runtime's type, so that a table can state them briefly.
func reportedOf(tb testing.TB, r api.AdapterStatusReport) []conditions.Reported {
	tb.Helper()
	out := make([]conditions.Reported, 0, len(r.Conditions))
	for _, c := range r.Conditions {
		require.NotNil(tb, c.Status)
		if c.Reason != nil {
			require.NotEmpty(tb, *c.Reason, "an empty reason must be left out, not sent")
		}
		if c.Message != nil {
			require.NotEmpty(tb, *c.Message, "an empty message must be left out, not sent")
		}
		out = append(out, conditions.Reported{Type: c.Type, Status: conditions.Status(c.Status), Reason: deref(c.Reason), Message: deref(c.Message)})
	}
	return out
}

func TestBuildReportConditions(t *testing.T) {
	errDown := errors.New("registry unreachable")
	ready := conditions.Reported{Status: conditions.True, Reason: "ImageResolved", Message: "quay.io/x@sha256:1"}
	ok := func(typ, reason string) conditions.Reported {
		return conditions.Reported{Type: typ, Status: conditions.True, Reason: reason}
	}
	failed := func(typ, reason, msg string) conditions.Reported {
		return conditions.Reported{Type: typ, Status: conditions.False, Reason: reason, Message: msg}
	}
	tests := []struct {
		name       string
		out        Outcome
		err        error
		finalizing bool
		want       []conditions.Reported
	}{
		{
			name: "success takes Available from the outcome",
			out:  Outcome{Available: ready},
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.True, Reason: "ImageResolved", Message: "quay.io/x@sha256:1"},
				ok(conditions.Applied, conditions.ReasonReconciled), ok(conditions.Health, conditions.ReasonReconciled),
			},
		},
		{
			name: "the outcome cannot rename Available",
			out:  Outcome{Available: conditions.Reported{Type: "Ready", Status: conditions.False, Reason: "Waiting"}},
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.False, Reason: "Waiting"},
				ok(conditions.Applied, conditions.ReasonReconciled), ok(conditions.Health, conditions.ReasonReconciled),
			},
		},
		{
			name: "success without Available reports it conditions.Unknown",
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.Unknown, Reason: conditions.ReasonNotReported},
				ok(conditions.Applied, conditions.ReasonReconciled), ok(conditions.Health, conditions.ReasonReconciled),
			},
		},
		{
			name: "plain error is transient and makes an empty Available conditions.False",
			err:  errDown,
			want: []conditions.Reported{
				failed(conditions.Available, conditions.ReasonTransientError, "registry unreachable"),
				failed(conditions.Applied, conditions.ReasonTransientError, "registry unreachable"),
				failed(conditions.Health, conditions.ReasonTransientError, "registry unreachable"),
			},
		},
		{
			name: "transient error with its own reason",
			err:  fmt.Errorf("resolve: %w", Transient("RegistryDown", errDown)),
			want: []conditions.Reported{
				failed(conditions.Available, "RegistryDown", "resolve: registry unreachable"),
				failed(conditions.Applied, "RegistryDown", "resolve: registry unreachable"),
				failed(conditions.Health, "RegistryDown", "resolve: registry unreachable"),
			},
		},
		{
			// The last known image still works while the registry is down.
			name: "transient error keeps an Available the outcome set",
			out:  Outcome{Available: ready},
			err:  Transient("RegistryDown", errDown),
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.True, Reason: "ImageResolved", Message: "quay.io/x@sha256:1"},
				failed(conditions.Applied, "RegistryDown", "registry unreachable"),
				failed(conditions.Health, "RegistryDown", "registry unreachable"),
			},
		},
		{
			name: "terminal error without a reason",
			err:  Terminal("", errors.New("spec.channel is empty")),
			want: []conditions.Reported{
				failed(conditions.Available, conditions.ReasonTerminalError, "spec.channel is empty"),
				failed(conditions.Applied, conditions.ReasonTerminalError, "spec.channel is empty"),
				failed(conditions.Health, conditions.ReasonTerminalError, "spec.channel is empty"),
			},
		},
		{
			name: "terminal error with its own reason",
			out:  Outcome{Available: conditions.Reported{Status: conditions.False, Reason: "NoSuchVersion"}},
			err:  Terminalf("InvalidSpec", "version %q does not exist", "4.99"),
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.False, Reason: "NoSuchVersion"},
				failed(conditions.Applied, "InvalidSpec", `version "4.99" does not exist`),
				failed(conditions.Health, "InvalidSpec", `version "4.99" does not exist`),
			},
		},
		{
			name:       "finalized",
			out:        Outcome{Finalized: true},
			finalizing: true,
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.Unknown, Reason: conditions.ReasonNotReported},
				ok(conditions.Applied, conditions.ReasonFinalized), ok(conditions.Health, conditions.ReasonFinalized),
				ok(conditions.Finalized, conditions.ReasonFinalized),
			},
		},
		{
			name:       "still finalizing",
			out:        Outcome{Available: conditions.Reported{Status: conditions.False, Reason: "Deleting"}},
			finalizing: true,
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.False, Reason: "Deleting"},
				ok(conditions.Applied, conditions.ReasonFinalizing), ok(conditions.Health, conditions.ReasonFinalizing),
				{Type: conditions.Finalized, Status: conditions.False, Reason: conditions.ReasonFinalizing},
			},
		},
		{
			// An error wins over a Finalized the outcome claims: cleanup cannot be trusted to be complete.
			name:       "finalize failed",
			out:        Outcome{Finalized: true},
			err:        errDown,
			finalizing: true,
			want: []conditions.Reported{
				failed(conditions.Available, conditions.ReasonTransientError, "registry unreachable"),
				failed(conditions.Applied, conditions.ReasonTransientError, "registry unreachable"),
				failed(conditions.Health, conditions.ReasonTransientError, "registry unreachable"),
				{Type: conditions.Finalized, Status: conditions.False, Reason: conditions.ReasonFinalizing},
			},
		},
		{
			name: "own conditions follow, without runtime types, duplicates or empty types",
			out: Outcome{Available: ready, Conditions: []conditions.Reported{
				{Type: "ImageResolved", Status: conditions.True, Reason: "Found"},
				{Type: conditions.Applied, Status: conditions.False, Reason: "Overridden"},
				{Type: conditions.Available, Status: conditions.False, Reason: "Overridden"},
				{Type: conditions.Health, Status: conditions.False, Reason: "Overridden"},
				{Type: "ImageResolved", Status: conditions.False, Reason: "Duplicate"},
				{Status: conditions.True, Reason: "NoType"},
				{Type: "Pinned"},
			}},
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.True, Reason: "ImageResolved", Message: "quay.io/x@sha256:1"},
				ok(conditions.Applied, conditions.ReasonReconciled), ok(conditions.Health, conditions.ReasonReconciled),
				{Type: "ImageResolved", Status: conditions.True, Reason: "Found"},
				{Type: "Pinned", Status: conditions.Unknown},
			},
		},
		{
			name:       "own conditions cannot override Finalized while finalizing",
			out:        Outcome{Conditions: []conditions.Reported{{Type: conditions.Finalized, Status: conditions.True, Reason: "Overridden"}}},
			finalizing: true,
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.Unknown, Reason: conditions.ReasonNotReported},
				ok(conditions.Applied, conditions.ReasonFinalizing), ok(conditions.Health, conditions.ReasonFinalizing),
				{Type: conditions.Finalized, Status: conditions.False, Reason: conditions.ReasonFinalizing},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &Object{Kind: "VersionStream", ID: "id-1", Generation: 3}
			r := buildReport("version-resolver", obj, tt.out, tt.err, tt.finalizing, time.Unix(1_700_000_000, 0), nil)
			require.Equal(t, tt.want, reportedOf(t, r))
		})
	}
}

func TestBuildReportEnvelope(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	obj := &Object{Kind: "VersionStream", ID: "id-1", Generation: 7,
		LastReport: &Report{ObservedGeneration: 6}}

	t.Run("data and metadata pass through", func(t *testing.T) {
		data := map[string]any{"image": "quay.io/x@sha256:1", "versions": []any{"4.16.1"}}
		meta := map[string]any{"replica": "r-0", "shard_index": 0, "shard_count": 2}
		r := buildReport("version-resolver", obj, Outcome{Data: data}, nil, false, now, meta)
		require.Equal(t, "version-resolver", r.Adapter)
		require.Equal(t, int64(7), r.ObservedGeneration, "the generation the reconcile saw, not the last report's")
		require.Equal(t, now.UTC(), r.ObservedTime)
		require.Equal(t, time.UTC, r.ObservedTime.Location())
		require.NotNil(t, r.Data)
		require.Equal(t, data, *r.Data)
		require.NotNil(t, r.Metadata)
		require.Equal(t, meta, *r.Metadata)
	})

	t.Run("no data and no metadata are left out", func(t *testing.T) {
		r := buildReport("version-resolver", obj, Outcome{}, nil, false, now, nil)
		require.Nil(t, r.Data)
		require.Nil(t, r.Metadata)
	})

	t.Run("long messages are truncated to valid UTF-8", func(t *testing.T) {
		// A multi-byte rune straddles the cut, as it would in a quoted response body.
		long := strings.Repeat("a", maxMessage-1) + strings.Repeat("é", 2000)
		r := buildReport("version-resolver", obj, Outcome{Conditions: []conditions.Reported{{Type: "Body", Status: conditions.True, Message: long}}},
			errors.New(long), false, now, nil)
		require.Len(t, r.Conditions, 4)
		for _, c := range r.Conditions {
			require.NotNil(t, c.Message, c.Type)
			msg := *c.Message
			require.True(t, utf8.ValidString(msg), c.Type)
			require.LessOrEqual(t, len(msg), maxMessage+len("…"), c.Type)
			require.Equal(t, strings.Repeat("a", maxMessage-1)+"…", msg, c.Type)
		}
	})
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{name: "short", s: "abc", n: 5, want: "abc"},
		{name: "exactly n", s: "abcde", n: 5, want: "abcde"},
		{name: "ascii", s: "abcdef", n: 5, want: "abcde…"},
		{name: "cut inside a two-byte rune", s: "ééé", n: 3, want: "é…"},
		{name: "cut after a two-byte rune", s: "ééé", n: 4, want: "éé…"},
		{name: "cut inside a four-byte rune", s: "a😀b", n: 3, want: "a…"},
		{name: "cut before the first rune ends", s: "😀😀", n: 2, want: "…"},
		{name: "empty", s: "", n: 0, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := truncate(tt.s, tt.n)
			require.Equal(t, tt.want, got)
			require.True(t, utf8.ValidString(got))
		})
	}
}

func TestChanged(t *testing.T) {
	reason := func(s string) *string { return &s }
	last := &Report{Conditions: []conditions.Condition{
		{Type: conditions.Available, Status: conditions.True, Reason: "ImageResolved", Message: "old"},
		{Type: conditions.Applied, Status: conditions.True, Reason: conditions.ReasonReconciled},
		{Type: "Extra", Status: conditions.True},
	}}
	tests := []struct {
		name  string
		last  *Report
		conds []api.ReportedCondition
		want  bool
	}{
		{name: "first report", last: nil, conds: []api.ReportedCondition{{Type: conditions.Available, Status: "True"}}, want: true},
		{
			name: "same statuses and reasons, other message",
			last: last,
			conds: []api.ReportedCondition{
				{Type: conditions.Available, Status: "True", Reason: reason("ImageResolved"), Message: reason("new")},
				{Type: conditions.Applied, Status: "True", Reason: reason(conditions.ReasonReconciled)},
			},
			want: false,
		},
		{
			name:  "status differs",
			last:  last,
			conds: []api.ReportedCondition{{Type: conditions.Available, Status: "False", Reason: reason("ImageResolved")}},
			want:  true,
		},
		{
			name:  "reason differs",
			last:  last,
			conds: []api.ReportedCondition{{Type: conditions.Applied, Status: "True", Reason: reason(conditions.ReasonFinalizing)}},
			want:  true,
		},
		{
			name:  "reason dropped",
			last:  last,
			conds: []api.ReportedCondition{{Type: conditions.Applied, Status: "True"}},
			want:  true,
		},
		{
			name:  "new condition type",
			last:  last,
			conds: []api.ReportedCondition{{Type: conditions.Health, Status: "True", Reason: reason(conditions.ReasonReconciled)}},
			want:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, changed(tt.last, tt.conds))
		})
	}
}

func TestErrorReason(t *testing.T) {
	cause := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "plain error", err: cause, want: conditions.ReasonTransientError},
		{name: "context deadline", err: context.DeadlineExceeded, want: conditions.ReasonTransientError},
		{name: "transient without reason", err: Transient("", cause), want: conditions.ReasonTransientError},
		{name: "transient with reason", err: Transient("RegistryDown", cause), want: "RegistryDown"},
		{name: "terminal without reason", err: Terminal("", cause), want: conditions.ReasonTerminalError},
		{name: "terminal with reason", err: Terminal("InvalidSpec", cause), want: "InvalidSpec"},
		{name: "terminalf", err: Terminalf("InvalidSpec", "bad %s", "spec"), want: "InvalidSpec"},
		{name: "wrapped terminal", err: fmt.Errorf("resolve: %w", Terminal("InvalidSpec", cause)), want: "InvalidSpec"},
		{name: "wrapped sentinel", err: fmt.Errorf("resolve: %w", ErrTerminal), want: conditions.ReasonTerminalError},
		{name: "panic", err: Transient(conditions.ReasonReconcilerPanic, cause), want: conditions.ReasonReconcilerPanic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, errorReason(tt.err))
		})
	}
}

func TestErrorClasses(t *testing.T) {
	apiErr := &APIError{Op: "get", Status: 503}
	tests := []struct {
		name          string
		err           error
		cause         error
		terminal      bool
		transient     bool
		wantAPIStatus int
	}{
		{name: "terminal", err: Terminal("InvalidSpec", io.ErrUnexpectedEOF), cause: io.ErrUnexpectedEOF, terminal: true},
		{name: "transient", err: Transient("RegistryDown", io.ErrUnexpectedEOF), cause: io.ErrUnexpectedEOF, transient: true},
		{name: "wrapped transient", err: fmt.Errorf("fetch: %w", Transient("", io.EOF)), cause: io.EOF, transient: true},
		{name: "transient around an API error", err: Transient("", fmt.Errorf("get: %w", apiErr)), cause: apiErr,
			transient: true, wantAPIStatus: 503},
		{name: "terminalf", err: Terminalf("InvalidSpec", "decode: %w", io.ErrUnexpectedEOF), cause: io.ErrUnexpectedEOF, terminal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.terminal, errors.Is(tt.err, ErrTerminal))
			require.Equal(t, tt.transient, errors.Is(tt.err, ErrTransient))
			require.ErrorIs(t, tt.err, tt.cause, "the wrapped error must stay reachable")
			require.Contains(t, tt.err.Error(), tt.cause.Error(), "the class adds nothing to the message")
			require.NotContains(t, tt.err.Error(), "terminal")
			require.NotContains(t, tt.err.Error(), "transient")
			var e *APIError
			require.Equal(t, tt.wantAPIStatus != 0, errors.As(tt.err, &e))
			if tt.wantAPIStatus != 0 {
				require.Equal(t, tt.wantAPIStatus, e.Status)
			}
		})
	}
}

func TestCheckedReplacesReportsTheAPIWouldRefuse(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	obj := &Object{Generation: 3}
	valid := Outcome{Available: conditions.Reported{Status: conditions.True, Reason: "Fine"}}
	tests := []struct {
		name    string
		outcome Outcome
		err     error
		problem string // "" when the report is valid as built
	}{
		{name: "valid", outcome: valid},
		{name: "lowercase condition type", outcome: Outcome{Available: valid.Available, Conditions: []conditions.Reported{{Type: "imageResolved", Status: conditions.True}}}, problem: "conditions[3].type"},
		{name: "reason with a hyphen", outcome: Outcome{Available: conditions.Reported{Status: conditions.True, Reason: "All-Good"}}, problem: "conditions[0].reason"},
		{name: "error reason with a hyphen", outcome: valid, err: Transient("Backend-Down", errors.New("503")), problem: "reason"},
		{name: "data over 64 KiB", outcome: Outcome{Available: valid.Available, Data: map[string]any{"blob": strings.Repeat("x", 70<<10)}}, problem: "data"},
		{name: "too many conditions", outcome: Outcome{Available: valid.Available, Conditions: manyConditions(40)}, problem: "conditions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			built := buildReport("test-adapter", obj, tt.outcome, tt.err, false, now, nil)
			got, err := checked(built, now)
			if tt.problem == "" {
				require.NoError(t, err)
				require.Equal(t, built, got)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.problem)
			require.Nil(t, got.Data, "the data that broke the report is not sent")
			require.Equal(t, int64(3), got.ObservedGeneration)
			require.Len(t, got.Conditions, 3)
			for _, c := range got.Conditions {
				require.Equal(t, conditions.ReasonInvalidReport, *c.Reason)
				require.Contains(t, *c.Message, tt.problem)
			}
			require.Equal(t, "Health", got.Conditions[2].Type)
			require.Equal(t, api.ReportedConditionStatusFalse, got.Conditions[2].Status)
			_, err = checked(got, now)
			require.NoError(t, err, "the replacement itself is valid")
		})
	}
}

func manyConditions(n int) []conditions.Reported {
	out := make([]conditions.Reported, n)
	for i := range out {
		out[i] = conditions.Reported{Type: fmt.Sprintf("Extra%d", i), Status: conditions.True}
	}
	return out
}

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
)

// conditionsOf turns a report's conditions back into the runtime's type, so that a table can state them briefly.
func conditionsOf(tb testing.TB, r api.AdapterStatusReport) []Condition {
	tb.Helper()
	out := make([]Condition, 0, len(r.Conditions))
	for _, c := range r.Conditions {
		require.NotNil(tb, c.Status)
		if c.Reason != nil {
			require.NotEmpty(tb, *c.Reason, "an empty reason must be left out, not sent")
		}
		if c.Message != nil {
			require.NotEmpty(tb, *c.Message, "an empty message must be left out, not sent")
		}
		out = append(out, Condition{Type: c.Type, Status: ConditionStatus(c.Status), Reason: deref(c.Reason), Message: deref(c.Message)})
	}
	return out
}

func TestBuildReportConditions(t *testing.T) {
	errDown := errors.New("registry unreachable")
	ready := Condition{Status: True, Reason: "ImageResolved", Message: "quay.io/x@sha256:1"}
	ok := func(typ, reason string) Condition { return Condition{Type: typ, Status: True, Reason: reason} }
	failed := func(typ, reason, msg string) Condition {
		return Condition{Type: typ, Status: False, Reason: reason, Message: msg}
	}
	tests := []struct {
		name       string
		out        Outcome
		err        error
		finalizing bool
		want       []Condition
	}{
		{
			name: "success takes Available from the outcome",
			out:  Outcome{Available: ready},
			want: []Condition{
				{Type: ConditionAvailable, Status: True, Reason: "ImageResolved", Message: "quay.io/x@sha256:1"},
				ok(ConditionApplied, ReasonReconciled), ok(ConditionHealth, ReasonReconciled),
			},
		},
		{
			name: "the outcome cannot rename Available",
			out:  Outcome{Available: Condition{Type: "Ready", Status: False, Reason: "Waiting"}},
			want: []Condition{
				{Type: ConditionAvailable, Status: False, Reason: "Waiting"},
				ok(ConditionApplied, ReasonReconciled), ok(ConditionHealth, ReasonReconciled),
			},
		},
		{
			name: "success without Available reports it Unknown",
			want: []Condition{
				{Type: ConditionAvailable, Status: Unknown, Reason: ReasonNotReported},
				ok(ConditionApplied, ReasonReconciled), ok(ConditionHealth, ReasonReconciled),
			},
		},
		{
			name: "plain error is transient and makes an empty Available False",
			err:  errDown,
			want: []Condition{
				failed(ConditionAvailable, ReasonTransientError, "registry unreachable"),
				failed(ConditionApplied, ReasonTransientError, "registry unreachable"),
				failed(ConditionHealth, ReasonTransientError, "registry unreachable"),
			},
		},
		{
			name: "transient error with its own reason",
			err:  fmt.Errorf("resolve: %w", Transient("RegistryDown", errDown)),
			want: []Condition{
				failed(ConditionAvailable, "RegistryDown", "resolve: registry unreachable"),
				failed(ConditionApplied, "RegistryDown", "resolve: registry unreachable"),
				failed(ConditionHealth, "RegistryDown", "resolve: registry unreachable"),
			},
		},
		{
			// The last known image still works while the registry is down.
			name: "transient error keeps an Available the outcome set",
			out:  Outcome{Available: ready},
			err:  Transient("RegistryDown", errDown),
			want: []Condition{
				{Type: ConditionAvailable, Status: True, Reason: "ImageResolved", Message: "quay.io/x@sha256:1"},
				failed(ConditionApplied, "RegistryDown", "registry unreachable"),
				failed(ConditionHealth, "RegistryDown", "registry unreachable"),
			},
		},
		{
			name: "terminal error without a reason",
			err:  Terminal("", errors.New("spec.channel is empty")),
			want: []Condition{
				failed(ConditionAvailable, ReasonTerminalError, "spec.channel is empty"),
				failed(ConditionApplied, ReasonTerminalError, "spec.channel is empty"),
				failed(ConditionHealth, ReasonTerminalError, "spec.channel is empty"),
			},
		},
		{
			name: "terminal error with its own reason",
			out:  Outcome{Available: Condition{Status: False, Reason: "NoSuchVersion"}},
			err:  Terminalf("InvalidSpec", "version %q does not exist", "4.99"),
			want: []Condition{
				{Type: ConditionAvailable, Status: False, Reason: "NoSuchVersion"},
				failed(ConditionApplied, "InvalidSpec", `version "4.99" does not exist`),
				failed(ConditionHealth, "InvalidSpec", `version "4.99" does not exist`),
			},
		},
		{
			name:       "finalized",
			out:        Outcome{Finalized: true},
			finalizing: true,
			want: []Condition{
				{Type: ConditionAvailable, Status: Unknown, Reason: ReasonNotReported},
				ok(ConditionApplied, ReasonFinalized), ok(ConditionHealth, ReasonFinalized),
				ok(ConditionFinalized, ReasonFinalized),
			},
		},
		{
			name:       "still finalizing",
			out:        Outcome{Available: Condition{Status: False, Reason: "Deleting"}},
			finalizing: true,
			want: []Condition{
				{Type: ConditionAvailable, Status: False, Reason: "Deleting"},
				ok(ConditionApplied, ReasonFinalizing), ok(ConditionHealth, ReasonFinalizing),
				{Type: ConditionFinalized, Status: False, Reason: ReasonFinalizing},
			},
		},
		{
			// An error wins over a Finalized the outcome claims: cleanup cannot be trusted to be complete.
			name:       "finalize failed",
			out:        Outcome{Finalized: true},
			err:        errDown,
			finalizing: true,
			want: []Condition{
				failed(ConditionAvailable, ReasonTransientError, "registry unreachable"),
				failed(ConditionApplied, ReasonTransientError, "registry unreachable"),
				failed(ConditionHealth, ReasonTransientError, "registry unreachable"),
				{Type: ConditionFinalized, Status: False, Reason: ReasonFinalizing},
			},
		},
		{
			name: "own conditions follow, without runtime types, duplicates or empty types",
			out: Outcome{Available: ready, Conditions: []Condition{
				{Type: "ImageResolved", Status: True, Reason: "Found"},
				{Type: ConditionApplied, Status: False, Reason: "Overridden"},
				{Type: ConditionAvailable, Status: False, Reason: "Overridden"},
				{Type: ConditionHealth, Status: False, Reason: "Overridden"},
				{Type: "ImageResolved", Status: False, Reason: "Duplicate"},
				{Status: True, Reason: "NoType"},
				{Type: "Pinned"},
			}},
			want: []Condition{
				{Type: ConditionAvailable, Status: True, Reason: "ImageResolved", Message: "quay.io/x@sha256:1"},
				ok(ConditionApplied, ReasonReconciled), ok(ConditionHealth, ReasonReconciled),
				{Type: "ImageResolved", Status: True, Reason: "Found"},
				{Type: "Pinned", Status: Unknown},
			},
		},
		{
			name:       "own conditions cannot override Finalized while finalizing",
			out:        Outcome{Conditions: []Condition{{Type: ConditionFinalized, Status: True, Reason: "Overridden"}}},
			finalizing: true,
			want: []Condition{
				{Type: ConditionAvailable, Status: Unknown, Reason: ReasonNotReported},
				ok(ConditionApplied, ReasonFinalizing), ok(ConditionHealth, ReasonFinalizing),
				{Type: ConditionFinalized, Status: False, Reason: ReasonFinalizing},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &Object{Kind: "VersionStream", ID: "id-1", Generation: 3}
			r := buildReport("version-resolver", obj, tt.out, tt.err, tt.finalizing, time.Unix(1_700_000_000, 0), nil)
			require.Equal(t, tt.want, conditionsOf(t, r))
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
		r := buildReport("version-resolver", obj, Outcome{Conditions: []Condition{{Type: "Body", Status: True, Message: long}}},
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
	last := &Report{Conditions: []Condition{
		{Type: ConditionAvailable, Status: True, Reason: "ImageResolved", Message: "old"},
		{Type: ConditionApplied, Status: True, Reason: ReasonReconciled},
		{Type: "Extra", Status: True},
	}}
	tests := []struct {
		name  string
		last  *Report
		conds []api.ReportedCondition
		want  bool
	}{
		{name: "first report", last: nil, conds: []api.ReportedCondition{{Type: ConditionAvailable, Status: "True"}}, want: true},
		{
			name: "same statuses and reasons, other message",
			last: last,
			conds: []api.ReportedCondition{
				{Type: ConditionAvailable, Status: "True", Reason: reason("ImageResolved"), Message: reason("new")},
				{Type: ConditionApplied, Status: "True", Reason: reason(ReasonReconciled)},
			},
			want: false,
		},
		{
			name:  "status differs",
			last:  last,
			conds: []api.ReportedCondition{{Type: ConditionAvailable, Status: "False", Reason: reason("ImageResolved")}},
			want:  true,
		},
		{
			name:  "reason differs",
			last:  last,
			conds: []api.ReportedCondition{{Type: ConditionApplied, Status: "True", Reason: reason(ReasonFinalizing)}},
			want:  true,
		},
		{
			name:  "reason dropped",
			last:  last,
			conds: []api.ReportedCondition{{Type: ConditionApplied, Status: "True"}},
			want:  true,
		},
		{
			name:  "new condition type",
			last:  last,
			conds: []api.ReportedCondition{{Type: ConditionHealth, Status: "True", Reason: reason(ReasonReconciled)}},
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
		{name: "plain error", err: cause, want: ReasonTransientError},
		{name: "context deadline", err: context.DeadlineExceeded, want: ReasonTransientError},
		{name: "transient without reason", err: Transient("", cause), want: ReasonTransientError},
		{name: "transient with reason", err: Transient("RegistryDown", cause), want: "RegistryDown"},
		{name: "terminal without reason", err: Terminal("", cause), want: ReasonTerminalError},
		{name: "terminal with reason", err: Terminal("InvalidSpec", cause), want: "InvalidSpec"},
		{name: "terminalf", err: Terminalf("InvalidSpec", "bad %s", "spec"), want: "InvalidSpec"},
		{name: "wrapped terminal", err: fmt.Errorf("resolve: %w", Terminal("InvalidSpec", cause)), want: "InvalidSpec"},
		{name: "wrapped sentinel", err: fmt.Errorf("resolve: %w", ErrTerminal), want: ReasonTerminalError},
		{name: "panic", err: Transient(ReasonReconcilerPanic, cause), want: ReasonReconcilerPanic},
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
	valid := Outcome{Available: Condition{Status: True, Reason: "Fine"}}
	tests := []struct {
		name    string
		outcome Outcome
		err     error
		problem string // "" when the report is valid as built
	}{
		{name: "valid", outcome: valid},
		{name: "lowercase condition type", outcome: Outcome{Available: valid.Available, Conditions: []Condition{{Type: "imageResolved", Status: True}}}, problem: "conditions[3].type"},
		{name: "reason with a hyphen", outcome: Outcome{Available: Condition{Status: True, Reason: "All-Good"}}, problem: "conditions[0].reason"},
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
				require.Equal(t, ReasonInvalidReport, *c.Reason)
				require.Contains(t, *c.Message, tt.problem)
			}
			require.Equal(t, "Health", got.Conditions[2].Type)
			require.Equal(t, api.ReportedConditionStatusFalse, got.Conditions[2].Status)
			_, err = checked(got, now)
			require.NoError(t, err, "the replacement itself is valid")
		})
	}
}

func manyConditions(n int) []Condition {
	out := make([]Condition, n)
	for i := range out {
		out[i] = Condition{Type: fmt.Sprintf("Extra%d", i), Status: True}
	}
	return out
}

package resource

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testNow is the fixed clock of these tests: nothing here reads the wall clock.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// validReport returns a report that ValidateReport accepts at testNow; each case breaks one thing in it.
func validReport() StatusReport {
	return StatusReport{
		Adapter:            "version-resolver",
		ObservedGeneration: 1,
		ObservedTime:       testNow.Add(-time.Minute),
		Conditions: []ReportedCondition{
			{Type: "Available", Status: ConditionTrue, Reason: "ImageResolved", Message: "resolved"},
			{Type: "Applied", Status: ConditionFalse},
			{Type: "Health", Status: ConditionUnknown, Reason: "Not_Yet_Checked"},
		},
		Data:     json.RawMessage(`{"image":"quay.io/x:1"}`),
		Metadata: json.RawMessage(`{"job":"abc"}`),
	}
}

// jsonObjectOfSize returns a valid JSON object exactly n bytes long (n >= 8).
func jsonObjectOfSize(tb testing.TB, n int) json.RawMessage {
	tb.Helper()
	raw := json.RawMessage(`{"k":"` + strings.Repeat("a", n-8) + `"}`)
	require.Len(tb, raw, n)
	require.True(tb, json.Valid(raw))
	return raw
}

// problemFields asserts that err is a CodeInvalid *Error and returns the Field of each of its problems, in order.
func problemFields(tb testing.TB, err error) []string {
	tb.Helper()
	require.Error(tb, err)
	require.Equal(tb, CodeInvalid, ErrorCode(err))
	e, ok := err.(*Error)
	require.True(tb, ok, "want *Error, got %T", err)
	fields := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		fields[i] = f.Field
	}
	return fields
}

func TestValidateReport(t *testing.T) {
	manyConditions := func(n int) []ReportedCondition {
		out := []ReportedCondition{{Type: "Available", Status: ConditionTrue}}
		for i := 1; i < n; i++ {
			out = append(out, ReportedCondition{Type: fmt.Sprintf("Cond%d", i), Status: ConditionTrue})
		}
		return out
	}
	tests := []struct {
		name    string
		modify  func(r *StatusReport)
		want    []string // the Field of each reported problem; nil means valid
		wantMsg string   // a substring of the first problem's message, when set
	}{
		{name: "valid", modify: func(*StatusReport) {}},
		{name: "optional parts absent", modify: func(r *StatusReport) {
			r.Conditions = []ReportedCondition{{Type: "Available", Status: ConditionTrue}}
			r.Data, r.Metadata = nil, json.RawMessage(`null`)
		}},

		// adapter
		{name: "adapter empty", modify: func(r *StatusReport) { r.Adapter = "" }, want: []string{"adapter"}},
		{name: "adapter uppercase", modify: func(r *StatusReport) { r.Adapter = "Version-Resolver" }, want: []string{"adapter"}},
		{name: "adapter leading dash", modify: func(r *StatusReport) { r.Adapter = "-resolver" }, want: []string{"adapter"}},
		{name: "adapter trailing dash", modify: func(r *StatusReport) { r.Adapter = "resolver-" }, want: []string{"adapter"}},
		{name: "adapter underscore", modify: func(r *StatusReport) { r.Adapter = "version_resolver" }, want: []string{"adapter"}},
		{name: "adapter dot", modify: func(r *StatusReport) { r.Adapter = "version.resolver" }, want: []string{"adapter"}},
		{name: "adapter single char", modify: func(r *StatusReport) { r.Adapter = "a" }},
		{name: "adapter 63 chars", modify: func(r *StatusReport) { r.Adapter = strings.Repeat("a", 63) }},
		{name: "adapter 64 chars", modify: func(r *StatusReport) { r.Adapter = strings.Repeat("a", 64) }, want: []string{"adapter"}},

		// observed_generation
		{name: "generation 0", modify: func(r *StatusReport) { r.ObservedGeneration = 0 }, want: []string{"observed_generation"}},
		{name: "generation negative", modify: func(r *StatusReport) { r.ObservedGeneration = -1 }, want: []string{"observed_generation"}},
		{name: "generation large", modify: func(r *StatusReport) { r.ObservedGeneration = 1 << 40 }},

		// observed_time, relative to the now argument
		{name: "time zero", modify: func(r *StatusReport) { r.ObservedTime = time.Time{} },
			want: []string{"observed_time"}, wantMsg: "required"},
		{name: "time exactly now", modify: func(r *StatusReport) { r.ObservedTime = testNow }},
		{name: "time at the past bound", modify: func(r *StatusReport) { r.ObservedTime = testNow.Add(-ObservedTimePast) }},
		{name: "time just past the past bound", modify: func(r *StatusReport) { r.ObservedTime = testNow.Add(-ObservedTimePast - time.Nanosecond) },
			want: []string{"observed_time"}, wantMsg: "in the past"},
		{name: "time an hour old", modify: func(r *StatusReport) { r.ObservedTime = testNow.Add(-time.Hour) },
			want: []string{"observed_time"}, wantMsg: "in the past"},
		{name: "time at the future bound", modify: func(r *StatusReport) { r.ObservedTime = testNow.Add(ObservedTimeFuture) }},
		{name: "time just past the future bound", modify: func(r *StatusReport) { r.ObservedTime = testNow.Add(ObservedTimeFuture + time.Nanosecond) },
			want: []string{"observed_time"}, wantMsg: "in the future"},
		{name: "time in another zone, same instant", modify: func(r *StatusReport) {
			r.ObservedTime = testNow.Add(-ObservedTimePast).In(time.FixedZone("UTC+9", 9*3600))
		}},

		// conditions
		{name: "no conditions", modify: func(r *StatusReport) { r.Conditions = nil },
			want: []string{"conditions"}, wantMsg: "Available"},
		{name: "no Available", modify: func(r *StatusReport) { r.Conditions = r.Conditions[1:] },
			want: []string{"conditions"}, wantMsg: "Available"},
		{name: "max conditions", modify: func(r *StatusReport) { r.Conditions = manyConditions(MaxConditions) }},
		{name: "too many conditions", modify: func(r *StatusReport) { r.Conditions = manyConditions(MaxConditions + 1) },
			want: []string{"conditions"}, wantMsg: "at most 32"},
		{name: "type lowercase first", modify: func(r *StatusReport) { r.Conditions[1].Type = "applied" }, want: []string{"conditions[1].type"}},
		{name: "type empty", modify: func(r *StatusReport) { r.Conditions[1].Type = "" }, want: []string{"conditions[1].type"}},
		{name: "type leading digit", modify: func(r *StatusReport) { r.Conditions[1].Type = "1Applied" }, want: []string{"conditions[1].type"}},
		{name: "type underscore", modify: func(r *StatusReport) { r.Conditions[1].Type = "Not_Applied" }, want: []string{"conditions[1].type"}},
		{name: "type dash", modify: func(r *StatusReport) { r.Conditions[1].Type = "Not-Applied" }, want: []string{"conditions[1].type"}},
		{name: "type with digits", modify: func(r *StatusReport) { r.Conditions[1].Type = "Applied2" }},
		{name: "type 128 chars", modify: func(r *StatusReport) { r.Conditions[1].Type = "A" + strings.Repeat("b", 127) }},
		{name: "type 129 chars", modify: func(r *StatusReport) { r.Conditions[1].Type = "A" + strings.Repeat("b", 128) },
			want: []string{"conditions[1].type"}},
		{name: "bad Available type fails format and presence", modify: func(r *StatusReport) { r.Conditions[0].Type = "available" },
			want: []string{"conditions[0].type", "conditions"}},
		{name: "duplicate type", modify: func(r *StatusReport) { r.Conditions[2].Type = "Applied" },
			want: []string{"conditions[2].type"}, wantMsg: "Applied appears more than once"},
		{name: "duplicate Available reported at each repeat", modify: func(r *StatusReport) {
			r.Conditions[1].Type, r.Conditions[2].Type = "Available", "Available"
		}, want: []string{"conditions[1].type", "conditions[2].type"}},
		{name: "status lowercase", modify: func(r *StatusReport) { r.Conditions[0].Status = "true" }, want: []string{"conditions[0].status"}},
		{name: "status empty", modify: func(r *StatusReport) { r.Conditions[1].Status = "" }, want: []string{"conditions[1].status"}},
		{name: "status other", modify: func(r *StatusReport) { r.Conditions[2].Status = "Maybe" }, want: []string{"conditions[2].status"}},
		{name: "reason empty is fine", modify: func(r *StatusReport) { r.Conditions[0].Reason = "" }},
		{name: "reason lowercase first is fine", modify: func(r *StatusReport) { r.Conditions[0].Reason = "imageResolved" }},
		{name: "reason dash", modify: func(r *StatusReport) { r.Conditions[0].Reason = "image-resolved" }, want: []string{"conditions[0].reason"}},
		{name: "reason space", modify: func(r *StatusReport) { r.Conditions[0].Reason = "Image Resolved" }, want: []string{"conditions[0].reason"}},
		{name: "reason leading digit", modify: func(r *StatusReport) { r.Conditions[0].Reason = "1Resolved" }, want: []string{"conditions[0].reason"}},
		{name: "reason leading underscore", modify: func(r *StatusReport) { r.Conditions[0].Reason = "_Resolved" }, want: []string{"conditions[0].reason"}},
		{name: "reason 128 chars", modify: func(r *StatusReport) { r.Conditions[0].Reason = "R" + strings.Repeat("x", 127) }},
		{name: "reason 129 chars", modify: func(r *StatusReport) { r.Conditions[0].Reason = "R" + strings.Repeat("x", 128) },
			want: []string{"conditions[0].reason"}},
		{name: "message at limit", modify: func(r *StatusReport) { r.Conditions[1].Message = strings.Repeat("m", MaxConditionMessage) }},
		{name: "message over limit", modify: func(r *StatusReport) { r.Conditions[1].Message = strings.Repeat("m", MaxConditionMessage+1) },
			want: []string{"conditions[1].message"}},
		{name: "message limit is in bytes", modify: func(r *StatusReport) { r.Conditions[1].Message = strings.Repeat("é", MaxConditionMessage/2+1) },
			want: []string{"conditions[1].message"}},
		{name: "every problem of one condition", modify: func(r *StatusReport) {
			r.Conditions[1] = ReportedCondition{Type: "x", Status: "x", Reason: "-", Message: strings.Repeat("m", MaxConditionMessage+1)}
		}, want: []string{"conditions[1].type", "conditions[1].status", "conditions[1].reason", "conditions[1].message"}},

		// data and metadata
		{name: "data empty object", modify: func(r *StatusReport) { r.Data = json.RawMessage(`{}`) }},
		{name: "data array", modify: func(r *StatusReport) { r.Data = json.RawMessage(`[]`) }, want: []string{"data"}, wantMsg: "JSON object"},
		{name: "data string", modify: func(r *StatusReport) { r.Data = json.RawMessage(`"x"`) }, want: []string{"data"}},
		{name: "data number", modify: func(r *StatusReport) { r.Data = json.RawMessage(`1`) }, want: []string{"data"}},
		{name: "data not JSON", modify: func(r *StatusReport) { r.Data = json.RawMessage(`{"a":`) }, want: []string{"data"}},
		{name: "data at limit", modify: func(r *StatusReport) { r.Data = jsonObjectOfSize(t, MaxStatusDataBytes) }},
		{name: "data over limit", modify: func(r *StatusReport) { r.Data = jsonObjectOfSize(t, MaxStatusDataBytes+1) },
			want: []string{"data"}, wantMsg: "at most 65536 bytes"},
		{name: "metadata array", modify: func(r *StatusReport) { r.Metadata = json.RawMessage(`[{}]`) }, want: []string{"metadata"}},
		{name: "metadata at limit", modify: func(r *StatusReport) { r.Metadata = jsonObjectOfSize(t, MaxStatusMetadataBytes) }},
		{name: "metadata over limit", modify: func(r *StatusReport) { r.Metadata = jsonObjectOfSize(t, MaxStatusMetadataBytes+1) },
			want: []string{"metadata"}, wantMsg: "at most 16384 bytes"},
		{name: "data and metadata have their own limits", modify: func(r *StatusReport) {
			r.Data = jsonObjectOfSize(t, MaxStatusMetadataBytes+1)
			r.Metadata = jsonObjectOfSize(t, MaxStatusMetadataBytes+1)
		}, want: []string{"metadata"}},

		// several problems are all reported, in field order
		{name: "everything wrong", modify: func(r *StatusReport) {
			r.Adapter = "Bad Adapter"
			r.ObservedGeneration = 0
			r.ObservedTime = testNow.Add(time.Hour)
			r.Conditions = []ReportedCondition{
				{Type: "Applied", Status: "yes"},
				{Type: "Applied", Status: ConditionTrue, Reason: "no good"},
			}
			r.Data = json.RawMessage(`[1]`)
			r.Metadata = json.RawMessage(`"m"`)
		}, want: []string{
			"adapter", "observed_generation", "observed_time",
			"conditions[0].status", "conditions[1].type", "conditions[1].reason", "conditions",
			"data", "metadata",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := validReport()
			tt.modify(&rep)
			err := ValidateReport(rep, testNow)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tt.want, problemFields(t, err))
			if tt.wantMsg != "" {
				require.Contains(t, err.(*Error).Fields[0].Message, tt.wantMsg)
			}
		})
	}
}

func TestMergeConditions(t *testing.T) {
	earlier := testNow.Add(-time.Hour)
	tests := []struct {
		name       string
		reported   []ReportedCondition
		stored     []Condition
		generation int64
		want       []Condition
	}{
		{
			name:       "first report: every condition transitions now",
			reported:   []ReportedCondition{{Type: "Available", Status: ConditionTrue, Reason: "Ok", Message: "fine"}, {Type: "Applied", Status: ConditionFalse}},
			generation: 2,
			want: []Condition{
				{Type: "Available", Status: ConditionTrue, Reason: "Ok", Message: "fine", ObservedGeneration: 2, LastTransitionTime: testNow, LastUpdatedTime: testNow},
				{Type: "Applied", Status: ConditionFalse, ObservedGeneration: 2, LastTransitionTime: testNow, LastUpdatedTime: testNow},
			},
		},
		{
			name:     "same type and status keeps the transition time, takes the new reason and generation",
			reported: []ReportedCondition{{Type: "Available", Status: ConditionTrue, Reason: "StillOk", Message: "new"}},
			stored: []Condition{{Type: "Available", Status: ConditionTrue, Reason: "Ok", Message: "old", ObservedGeneration: 1,
				LastTransitionTime: earlier, LastUpdatedTime: earlier}},
			generation: 3,
			want: []Condition{{Type: "Available", Status: ConditionTrue, Reason: "StillOk", Message: "new", ObservedGeneration: 3,
				LastTransitionTime: earlier, LastUpdatedTime: testNow}},
		},
		{
			name:       "a status flip moves the transition time",
			reported:   []ReportedCondition{{Type: "Available", Status: ConditionFalse}},
			stored:     []Condition{{Type: "Available", Status: ConditionTrue, ObservedGeneration: 1, LastTransitionTime: earlier, LastUpdatedTime: earlier}},
			generation: 1,
			want:       []Condition{{Type: "Available", Status: ConditionFalse, ObservedGeneration: 1, LastTransitionTime: testNow, LastUpdatedTime: testNow}},
		},
		{
			name:       "Unknown to True is a flip too",
			reported:   []ReportedCondition{{Type: "Available", Status: ConditionTrue}},
			stored:     []Condition{{Type: "Available", Status: ConditionUnknown, LastTransitionTime: earlier, LastUpdatedTime: earlier}},
			generation: 1,
			want:       []Condition{{Type: "Available", Status: ConditionTrue, ObservedGeneration: 1, LastTransitionTime: testNow, LastUpdatedTime: testNow}},
		},
		{
			name:       "a stored condition without a transition time gets now",
			reported:   []ReportedCondition{{Type: "Available", Status: ConditionTrue}},
			stored:     []Condition{{Type: "Available", Status: ConditionTrue}},
			generation: 1,
			want:       []Condition{{Type: "Available", Status: ConditionTrue, ObservedGeneration: 1, LastTransitionTime: testNow, LastUpdatedTime: testNow}},
		},
		{
			name:     "new types get now, matched types keep theirs, dropped types vanish",
			reported: []ReportedCondition{{Type: "Available", Status: ConditionTrue}, {Type: "Finalized", Status: ConditionFalse}},
			stored: []Condition{
				{Type: "Applied", Status: ConditionTrue, LastTransitionTime: earlier.Add(-time.Hour)},
				{Type: "Available", Status: ConditionTrue, LastTransitionTime: earlier},
			},
			generation: 5,
			want: []Condition{
				{Type: "Available", Status: ConditionTrue, ObservedGeneration: 5, LastTransitionTime: earlier, LastUpdatedTime: testNow},
				{Type: "Finalized", Status: ConditionFalse, ObservedGeneration: 5, LastTransitionTime: testNow, LastUpdatedTime: testNow},
			},
		},
		{
			name:     "the same status under another type does not count",
			reported: []ReportedCondition{{Type: "Available", Status: ConditionTrue}},
			stored:   []Condition{{Type: "Applied", Status: ConditionTrue, LastTransitionTime: earlier}},
			want:     []Condition{{Type: "Available", Status: ConditionTrue, LastTransitionTime: testNow, LastUpdatedTime: testNow}},
		},
		{
			name:   "no conditions reported",
			stored: []Condition{{Type: "Available", Status: ConditionTrue, LastTransitionTime: earlier}},
			want:   []Condition{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mergeConditions(tt.reported, tt.stored, tt.generation, testNow)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCheckFresh(t *testing.T) {
	storedTime := testNow.Add(-10 * time.Minute)
	stored := &AdapterStatus{Adapter: "version-resolver", ObservedGeneration: 3, ObservedTime: storedTime}
	tests := []struct {
		name       string
		generation int64
		observed   time.Time
		wantStale  bool
	}{
		{name: "older generation, later time", generation: 2, observed: storedTime.Add(time.Hour), wantStale: true},
		{name: "older generation, same time", generation: 2, observed: storedTime, wantStale: true},
		{name: "same generation, earlier time", generation: 3, observed: storedTime.Add(-time.Nanosecond), wantStale: true},
		{name: "same generation, same time (a retry)", generation: 3, observed: storedTime},
		{name: "same generation, same instant in another zone", generation: 3, observed: storedTime.In(time.FixedZone("UTC-5", -5*3600))},
		{name: "same generation, later time", generation: 3, observed: storedTime.Add(time.Second)},
		{name: "newer generation, earlier time", generation: 4, observed: storedTime.Add(-time.Hour)},
		{name: "newer generation, later time", generation: 4, observed: storedTime.Add(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := validReport()
			rep.ObservedGeneration, rep.ObservedTime = tt.generation, tt.observed
			err := checkFresh(rep, stored)
			if !tt.wantStale {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Equal(t, CodeStatusStale, ErrorCode(err))
			require.Equal(t, CodeStatusStale, ErrorCode(fmt.Errorf("put status: %w", err)), "the code survives wrapping")
		})
	}
}

func TestSameStatus(t *testing.T) {
	later := testNow.Add(time.Minute)
	base := Status{Phase: PhaseReady, Conditions: []Condition{
		{Type: "Ready", Status: ConditionTrue, Reason: "AllAdaptersReady", ObservedGeneration: 2, LastTransitionTime: testNow, LastUpdatedTime: testNow},
	}}
	with := func(change func(c *Condition, s *Status)) Status {
		out := Status{Phase: base.Phase, Conditions: append([]Condition(nil), base.Conditions...)}
		change(&out.Conditions[0], &out)
		return out
	}
	tests := []struct {
		name  string
		other Status
		want  bool
	}{
		{"identical", with(func(*Condition, *Status) {}), true},
		{"only recomputed later", with(func(c *Condition, _ *Status) { c.LastUpdatedTime = later }), true},
		{"phase", with(func(_ *Condition, s *Status) { s.Phase = PhaseDegraded }), false},
		{"status", with(func(c *Condition, _ *Status) { c.Status = ConditionFalse }), false},
		{"reason", with(func(c *Condition, _ *Status) { c.Reason = "Other" }), false},
		{"message", with(func(c *Condition, _ *Status) { c.Message = "m" }), false},
		{"generation", with(func(c *Condition, _ *Status) { c.ObservedGeneration = 3 }), false},
		{"transition", with(func(c *Condition, _ *Status) { c.LastTransitionTime = later }), false},
		{"more conditions", Status{Phase: PhaseReady, Conditions: append(append([]Condition(nil), base.Conditions...), Condition{Type: "X"})}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, sameStatus(base, tt.other))
		})
	}
}

package conditions

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

// validReport returns a report that Validate accepts at testNow; each case breaks one thing in it.
func validReport() Report {
	return Report{
		Adapter:            "version-resolver",
		ObservedGeneration: 1,
		ObservedTime:       testNow.Add(-time.Minute),
		Conditions: []Reported{
			{Type: "Available", Status: True, Reason: "ImageResolved", Message: "resolved"},
			{Type: "Applied", Status: False},
			{Type: "Health", Status: Unknown, Reason: "Not_Yet_Checked"},
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

// fields returns the Field of each problem, in order; nil for none.
func fields(problems []Problem) []string {
	if len(problems) == 0 {
		return nil
	}
	out := make([]string, len(problems))
	for i, p := range problems {
		out[i] = p.Field
	}
	return out
}

func TestValidateReport(t *testing.T) {
	manyConditions := func(n int) []Reported {
		out := []Reported{{Type: "Available", Status: True}}
		for i := 1; i < n; i++ {
			out = append(out, Reported{Type: fmt.Sprintf("Cond%d", i), Status: True})
		}
		return out
	}
	tests := []struct {
		name    string
		modify  func(r *Report)
		want    []string // the Field of each reported problem; nil means valid
		wantMsg string   // a substring of the first problem's message, when set
	}{
		{name: "valid", modify: func(*Report) {}},
		{name: "optional parts absent", modify: func(r *Report) {
			r.Conditions = []Reported{{Type: "Available", Status: True}}
			r.Data, r.Metadata = nil, json.RawMessage(`null`)
		}},

		// adapter
		{name: "adapter empty", modify: func(r *Report) { r.Adapter = "" }, want: []string{"adapter"}},
		{name: "adapter uppercase", modify: func(r *Report) { r.Adapter = "Version-Resolver" }, want: []string{"adapter"}},
		{name: "adapter leading dash", modify: func(r *Report) { r.Adapter = "-resolver" }, want: []string{"adapter"}},
		{name: "adapter trailing dash", modify: func(r *Report) { r.Adapter = "resolver-" }, want: []string{"adapter"}},
		{name: "adapter underscore", modify: func(r *Report) { r.Adapter = "version_resolver" }, want: []string{"adapter"}},
		{name: "adapter dot", modify: func(r *Report) { r.Adapter = "version.resolver" }, want: []string{"adapter"}},
		{name: "adapter single char", modify: func(r *Report) { r.Adapter = "a" }},
		{name: "adapter 63 chars", modify: func(r *Report) { r.Adapter = strings.Repeat("a", 63) }},
		{name: "adapter 64 chars", modify: func(r *Report) { r.Adapter = strings.Repeat("a", 64) }, want: []string{"adapter"}},

		// observed_generation
		{name: "generation 0", modify: func(r *Report) { r.ObservedGeneration = 0 }, want: []string{"observed_generation"}},
		{name: "generation negative", modify: func(r *Report) { r.ObservedGeneration = -1 }, want: []string{"observed_generation"}},
		{name: "generation large", modify: func(r *Report) { r.ObservedGeneration = 1 << 40 }},

		// observed_time, relative to the now argument
		{name: "time zero", modify: func(r *Report) { r.ObservedTime = time.Time{} },
			want: []string{"observed_time"}, wantMsg: "required"},
		{name: "time exactly now", modify: func(r *Report) { r.ObservedTime = testNow }},
		{name: "time at the past bound", modify: func(r *Report) { r.ObservedTime = testNow.Add(-ObservedTimePast) }},
		{name: "time just past the past bound", modify: func(r *Report) { r.ObservedTime = testNow.Add(-ObservedTimePast - time.Nanosecond) },
			want: []string{"observed_time"}, wantMsg: "in the past"},
		{name: "time an hour old", modify: func(r *Report) { r.ObservedTime = testNow.Add(-time.Hour) },
			want: []string{"observed_time"}, wantMsg: "in the past"},
		{name: "time at the future bound", modify: func(r *Report) { r.ObservedTime = testNow.Add(ObservedTimeFuture) }},
		{name: "time just past the future bound", modify: func(r *Report) { r.ObservedTime = testNow.Add(ObservedTimeFuture + time.Nanosecond) },
			want: []string{"observed_time"}, wantMsg: "in the future"},
		{name: "time in another zone, same instant", modify: func(r *Report) {
			r.ObservedTime = testNow.Add(-ObservedTimePast).In(time.FixedZone("UTC+9", 9*3600))
		}},

		// conditions
		{name: "no conditions", modify: func(r *Report) { r.Conditions = nil },
			want: []string{"conditions"}, wantMsg: "Available"},
		{name: "no Available", modify: func(r *Report) { r.Conditions = r.Conditions[1:] },
			want: []string{"conditions"}, wantMsg: "Available"},
		{name: "max conditions", modify: func(r *Report) { r.Conditions = manyConditions(MaxConditions) }},
		{name: "too many conditions", modify: func(r *Report) { r.Conditions = manyConditions(MaxConditions + 1) },
			want: []string{"conditions"}, wantMsg: "at most 32"},
		{name: "type lowercase first", modify: func(r *Report) { r.Conditions[1].Type = "applied" }, want: []string{"conditions[1].type"}},
		{name: "type empty", modify: func(r *Report) { r.Conditions[1].Type = "" }, want: []string{"conditions[1].type"}},
		{name: "type leading digit", modify: func(r *Report) { r.Conditions[1].Type = "1Applied" }, want: []string{"conditions[1].type"}},
		{name: "type underscore", modify: func(r *Report) { r.Conditions[1].Type = "Not_Applied" }, want: []string{"conditions[1].type"}},
		{name: "type dash", modify: func(r *Report) { r.Conditions[1].Type = "Not-Applied" }, want: []string{"conditions[1].type"}},
		{name: "type with digits", modify: func(r *Report) { r.Conditions[1].Type = "Applied2" }},
		{name: "type 128 chars", modify: func(r *Report) { r.Conditions[1].Type = "A" + strings.Repeat("b", 127) }},
		{name: "type 129 chars", modify: func(r *Report) { r.Conditions[1].Type = "A" + strings.Repeat("b", 128) },
			want: []string{"conditions[1].type"}},
		{name: "bad Available type fails format and presence", modify: func(r *Report) { r.Conditions[0].Type = "available" },
			want: []string{"conditions[0].type", "conditions"}},
		{name: "duplicate type", modify: func(r *Report) { r.Conditions[2].Type = "Applied" },
			want: []string{"conditions[2].type"}, wantMsg: "Applied appears more than once"},
		{name: "duplicate Available reported at each repeat", modify: func(r *Report) {
			r.Conditions[1].Type, r.Conditions[2].Type = "Available", "Available"
		}, want: []string{"conditions[1].type", "conditions[2].type"}},
		{name: "status lowercase", modify: func(r *Report) { r.Conditions[0].Status = "true" }, want: []string{"conditions[0].status"}},
		{name: "status empty", modify: func(r *Report) { r.Conditions[1].Status = "" }, want: []string{"conditions[1].status"}},
		{name: "status other", modify: func(r *Report) { r.Conditions[2].Status = "Maybe" }, want: []string{"conditions[2].status"}},
		{name: "reason empty is fine", modify: func(r *Report) { r.Conditions[0].Reason = "" }},
		{name: "reason lowercase first is fine", modify: func(r *Report) { r.Conditions[0].Reason = "imageResolved" }},
		{name: "reason dash", modify: func(r *Report) { r.Conditions[0].Reason = "image-resolved" }, want: []string{"conditions[0].reason"}},
		{name: "reason space", modify: func(r *Report) { r.Conditions[0].Reason = "Image Resolved" }, want: []string{"conditions[0].reason"}},
		{name: "reason leading digit", modify: func(r *Report) { r.Conditions[0].Reason = "1Resolved" }, want: []string{"conditions[0].reason"}},
		{name: "reason leading underscore", modify: func(r *Report) { r.Conditions[0].Reason = "_Resolved" }, want: []string{"conditions[0].reason"}},
		{name: "reason 128 chars", modify: func(r *Report) { r.Conditions[0].Reason = "R" + strings.Repeat("x", 127) }},
		{name: "reason 129 chars", modify: func(r *Report) { r.Conditions[0].Reason = "R" + strings.Repeat("x", 128) },
			want: []string{"conditions[0].reason"}},
		{name: "message at limit", modify: func(r *Report) { r.Conditions[1].Message = strings.Repeat("m", MaxConditionMessage) }},
		{name: "message over limit", modify: func(r *Report) { r.Conditions[1].Message = strings.Repeat("m", MaxConditionMessage+1) },
			want: []string{"conditions[1].message"}},
		{name: "message limit is in bytes", modify: func(r *Report) { r.Conditions[1].Message = strings.Repeat("é", MaxConditionMessage/2+1) },
			want: []string{"conditions[1].message"}},
		{name: "every problem of one condition", modify: func(r *Report) {
			r.Conditions[1] = Reported{Type: "x", Status: "x", Reason: "-", Message: strings.Repeat("m", MaxConditionMessage+1)}
		}, want: []string{"conditions[1].type", "conditions[1].status", "conditions[1].reason", "conditions[1].message"}},

		// data and metadata
		{name: "data empty object", modify: func(r *Report) { r.Data = json.RawMessage(`{}`) }},
		{name: "data array", modify: func(r *Report) { r.Data = json.RawMessage(`[]`) }, want: []string{"data"}, wantMsg: "JSON object"},
		{name: "data string", modify: func(r *Report) { r.Data = json.RawMessage(`"x"`) }, want: []string{"data"}},
		{name: "data number", modify: func(r *Report) { r.Data = json.RawMessage(`1`) }, want: []string{"data"}},
		{name: "data not JSON", modify: func(r *Report) { r.Data = json.RawMessage(`{"a":`) }, want: []string{"data"}},
		{name: "data at limit", modify: func(r *Report) { r.Data = jsonObjectOfSize(t, MaxDataBytes) }},
		{name: "data over limit", modify: func(r *Report) { r.Data = jsonObjectOfSize(t, MaxDataBytes+1) },
			want: []string{"data"}, wantMsg: "at most 65536 bytes"},
		{name: "metadata array", modify: func(r *Report) { r.Metadata = json.RawMessage(`[{}]`) }, want: []string{"metadata"}},
		{name: "metadata at limit", modify: func(r *Report) { r.Metadata = jsonObjectOfSize(t, MaxMetadataBytes) }},
		{name: "metadata over limit", modify: func(r *Report) { r.Metadata = jsonObjectOfSize(t, MaxMetadataBytes+1) },
			want: []string{"metadata"}, wantMsg: "at most 16384 bytes"},
		{name: "data and metadata have their own limits", modify: func(r *Report) {
			r.Data = jsonObjectOfSize(t, MaxMetadataBytes+1)
			r.Metadata = jsonObjectOfSize(t, MaxMetadataBytes+1)
		}, want: []string{"metadata"}},

		// several problems are all reported, in field order
		{name: "everything wrong", modify: func(r *Report) {
			r.Adapter = "Bad Adapter"
			r.ObservedGeneration = 0
			r.ObservedTime = testNow.Add(time.Hour)
			r.Conditions = []Reported{
				{Type: "Applied", Status: "yes"},
				{Type: "Applied", Status: True, Reason: "no good"},
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
			problems := rep.Validate(testNow)
			require.Equal(t, tt.want, fields(problems))
			if tt.wantMsg != "" {
				require.Contains(t, problems[0].Message, tt.wantMsg)
			}
		})
	}
}

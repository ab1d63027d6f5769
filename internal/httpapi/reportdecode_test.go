package httpapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/jsonb"
)

// reportSeeds are bodies of both kinds: ones the one-pass parser takes, and ones it leaves to decodeStrict.
var reportSeeds = []struct {
	name string
	body string
	fast bool // the parser takes it itself
}{
	{"typical", strings.ReplaceAll(statusReportBody, "\n", ""), true},
	{"typical, with new lines", statusReportBody, true},
	{"empty object", `{}`, true},
	{"escapes", `{"adapter":"a\"b\\c\/d\n\u00e9\ud83d\ude00","conditions":[{"type":"T","status":"True","message":"\u003cx\u003e \t"}]}`, true},
	{"raw values of every kind", `{"data":{"a":[1,-2.5e+3,0,true,false,null,"s\u00e9",{}],"b":{"c":[]}},"metadata":null}`, true},
	{"conditions empty and null", `{"conditions":[],"data":{}}`, true},
	{"conditions null", `{"conditions":null}`, true},
	{"negative zero generation", `{"observed_generation":-0}`, true},
	{"blank around everything", " { \"adapter\" : \"a\" , \"observed_generation\" : 3 } \n", true},
	{"unknown member", `{"adapter":"a","colour":"red"}`, false},
	{"case-folded member", `{"Adapter":"a"}`, false},
	{"case-folded condition member", `{"conditions":[{"Type":"A","status":"True"}]}`, false},
	{"wrong type", `{"observed_generation":"3"}`, false},
	{"fraction", `{"observed_generation":3.0}`, false},
	{"too big", `{"observed_generation":9223372036854775808}`, false},
	{"bad time", `{"observed_time":"yesterday"}`, false},
	{"time with an escape", `{"observed_time":"2026-11-30T12:00:00\u005a"}`, false},
	{"null time", `{"observed_time":null}`, false},
	{"null string", `{"adapter":null}`, false},
	{"null condition", `{"conditions":[null]}`, false},
	{"repeated member", `{"adapter":"a","adapter":"b"}`, false},
	{"repeated in data", `{"data":{"x":1,"x":2}}`, false},
	{"NUL", `{"adapter":"a\u0000"}`, false},
	{"lone surrogate", `{"data":{"x":"\ud800"}}`, false},
	{"invalid UTF-8", "{\"adapter\":\"\xff\"}", false},
	{"trailing bracket", `{"adapter":"a"}]`, false},
	{"two objects", `{} {}`, false},
	{"not an object", `[1]`, false},
	{"empty", ``, false},
	{"truncated", `{"data":{"a":`, false},
	{"leading zero", `{"data":01}`, false},
	{"huge exponent", `{"data":1e999999}`, false},
}

// TestDecodeReport checks that the parser takes the bodies it should, and that decodeReport answers exactly as
// decodeStrict does on every seed.
func TestDecodeReport(t *testing.T) {
	for _, tt := range reportSeeds {
		t.Run(tt.name, func(t *testing.T) {
			p := reportParser{in: []byte(tt.body)}
			var fast reportBody
			took := p.report(&fast) && jsonb.Check([]byte(tt.body)) == nil
			require.Equal(t, tt.fast, took, "whether the one-pass parser takes it")
			requireSameAsStrict(t, []byte(tt.body))
		})
	}
}

// FuzzDecodeReport holds the one-pass report decoder to decodeStrict (encoding/json, strict, then jsonb's and
// the exact names' checks): the same bodies accepted, with the same values, and the same errors for the rest;
// and whatever the parser takes itself, decodeStrict takes too, with the same values.
func FuzzDecodeReport(f *testing.F) {
	for _, s := range reportSeeds {
		f.Add([]byte(s.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := reportParser{in: body}
		var fast reportBody
		if p.report(&fast) && jsonb.Check(body) == nil {
			var strict reportBody
			require.NoError(t, decodeStrictBytes(body, &strict), "decodeStrict refuses what the parser took")
			require.Equal(t, strict, fast)
		}
		requireSameAsStrict(t, body)
	})
}

func requireSameAsStrict(t *testing.T, body []byte) {
	t.Helper()
	var got, want reportBody
	gotErr := decodeReportBytes(body, &got)
	wantErr := decodeStrictBytes(body, &want)
	require.Equal(t, wantErr, gotErr)
	if wantErr == nil {
		require.Equal(t, want, got)
	}
}

package jsonb_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/jsonb"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

type checkCase struct {
	name   string
	doc    string
	path   string // the offending value's path; "" with ok
	reason string // a substring of the reason
	ok     bool   // PostgreSQL's jsonb accepts it
	// duplicate: Check reports a repeated member name (path and reason), which jsonb accepts (ok).
	duplicate bool
}

// storable is what PostgreSQL would say of a document Check returned p for.
func storable(p *jsonb.Problem) bool { return p == nil || p.Duplicate }

func checkCases() []checkCase {
	return []checkCase{
		{name: "plain", doc: `{"a":"b","n":[1,2.5,-3e2],"t":true,"z":null}`, ok: true},
		{name: "a repeated member", doc: `{"name":"a","name":"b"}`, ok: true, duplicate: true, path: "name", reason: `"name" appears twice`},
		{name: "a repeated member deep down", doc: `{"spec":{"p":[{"x":1,"y":2,"x":3}]}}`, ok: true, duplicate: true, path: "spec.p[0].x", reason: "twice"},
		{name: "names differing in case are distinct", doc: `{"name":"a","Name":"b","NAME":"c"}`, ok: true},
		{name: "the same name in sibling objects", doc: `{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]}`, ok: true},
		{name: "a repeat among many members", doc: `{"k01":1,"k02":1,"k03":1,"k04":1,"k05":1,"k06":1,"k07":1,"k08":1,"k09":1,"k10":1,"k11":1,"k12":1,"k13":1,"k14":1,"k15":1,"k16":1,"k17":1,"k18":1,"k03":2}`,
			ok: true, duplicate: true, path: "k03", reason: "twice"},
		{name: "a refusal wins over an earlier repeat", doc: `{"a":1,"a":2,"b":"\u0000"}`, path: "b", reason: "NUL"},
		{name: "escapes", doc: `{"a":"line\nbreak \"quoted\" \\ \/ \u00e9 \u2603"}`, ok: true},
		{name: "a surrogate pair", doc: `{"emoji":"\ud83d\ude00"}`, ok: true},
		{name: "raw UTF-8", doc: `{"name":"ébène ☃ 😀"}`, ok: true},
		{name: "NUL in a value", doc: `{"labels":{"env":"a\u0000b"}}`, path: "labels.env", reason: "NUL"},
		{name: "NUL in a key", doc: `{"data":{"a\u0000":1}}`, path: "data", reason: "NUL"},
		{name: "NUL deep in an array", doc: `{"spec":{"list":[{"x":"ok"},{"x":"\u0000"}]}}`, path: "spec.list[1].x", reason: "NUL"},
		{name: "lone high surrogate", doc: `{"m":"\ud800"}`, path: "m", reason: "surrogate"},
		{name: "high surrogate then text", doc: `{"m":"\ud800abc"}`, path: "m", reason: "surrogate"},
		{name: "two high surrogates", doc: `{"m":"\ud800\ud800"}`, path: "m", reason: "surrogate"},
		{name: "lone low surrogate", doc: `{"m":"\udc00"}`, path: "m", reason: "surrogate"},
		{name: "invalid UTF-8", doc: "{\"m\":\"a\xffb\"}", path: "m", reason: "UTF-8"},
		{name: "overlong UTF-8", doc: "{\"m\":\"\xc0\xaf\"}", path: "m", reason: "UTF-8"},
		{name: "UTF-8-encoded surrogate", doc: "{\"m\":\"\xed\xa0\x80\"}", path: "m", reason: "UTF-8"},
		{name: "top-level string", doc: `"\u0000"`, path: "", reason: "NUL"},
		{name: "largest exponent", doc: `{"n":1e131071}`, ok: true},
		{name: "exponent too large", doc: `{"n":1e131072}`, path: "n", reason: "before the decimal point"},
		{name: "tiny number", doc: `{"n":1e-16383}`, ok: true},
		{name: "too tiny", doc: `{"n":1e-100000}`, path: "n", reason: "after the decimal point"},
		{name: "too many decimals", doc: `{"n":0.` + strings.Repeat("1", 16384) + `}`, path: "n", reason: "after the decimal point"},
		{name: "many decimals", doc: `{"n":0.` + strings.Repeat("1", 16383) + `}`, ok: true},
		{name: "20,000 digits", doc: `{"data":{"n":1` + strings.Repeat("0", 20000) + `}}`, ok: true},
		{name: "too many digits", doc: `{"n":1` + strings.Repeat("0", 131072) + `}`, path: "n", reason: "before the decimal point"},
		{name: "digits and exponent", doc: `{"n":12.5e131071}`, path: "n", reason: "before the decimal point"},
		{name: "exponent past int32", doc: `{"n":1e9999999999}`, path: "n", reason: "beyond"},
		{name: "digits and exponent at the limit", doc: `{"n":12.5e131070}`, ok: true},
		{name: "zero with a huge exponent", doc: `{"n":0e131073}`, ok: true},
		{name: "negative zero", doc: `{"n":-0.0}`, ok: true},
		{name: "leading zeros in the fraction", doc: `{"n":0.000000001e131077}`, ok: true},
	}
}

func TestCheck(t *testing.T) {
	for _, tt := range checkCases() {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tt.doc)), "the case must be valid JSON")
			p := jsonb.Check([]byte(tt.doc))
			if tt.ok && !tt.duplicate {
				require.Nil(t, p)
				return
			}
			require.NotNil(t, p)
			require.Equal(t, tt.duplicate, p.Duplicate)
			require.Equal(t, tt.path, p.Path)
			require.Contains(t, p.Reason, tt.reason)
		})
	}
}

// TestCheckAgreesWithPostgreSQL casts every case to jsonb on a real server: Check reports a problem exactly when
// PostgreSQL refuses the document.
func TestCheckAgreesWithPostgreSQL(t *testing.T) {
	conn, err := pgx.Connect(context.Background(), harness.NewDatabase(t))
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	for _, tt := range checkCases() {
		t.Run(tt.name, func(t *testing.T) {
			var ok bool
			err := conn.QueryRow(context.Background(), "SELECT $1::text::jsonb IS NOT NULL", tt.doc).Scan(&ok)
			if strings.Contains(tt.doc, "\xff") || strings.Contains(tt.doc, "\xc0") || strings.Contains(tt.doc, "\xed") {
				// Invalid UTF-8 cannot even travel as text: the server refuses it on the way in (22021), as jsonb would.
				require.Error(t, err)
			}
			require.Equal(t, tt.ok, err == nil, "PostgreSQL: %v", err)
			require.Equal(t, tt.ok, storable(jsonb.Check([]byte(tt.doc))))
		})
	}
}

// FuzzCheckAgreesWithPostgreSQL casts what the fuzzer makes of the cases to jsonb: for every valid JSON document,
// Check finds a problem exactly when PostgreSQL refuses it. `go test` runs the seeds; fuzz with
// go test ./pkg/jsonb -run '^$' -fuzz FuzzCheckAgreesWithPostgreSQL -fuzztime 1m
func FuzzCheckAgreesWithPostgreSQL(f *testing.F) {
	for _, tt := range checkCases() {
		if len(tt.doc) < 1024 {
			f.Add(tt.doc)
		}
	}
	conn, err := pgx.Connect(context.Background(), harness.NewDatabase(f))
	require.NoError(f, err)
	f.Cleanup(func() { _ = conn.Close(context.Background()) })
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		var ok bool
		err := conn.QueryRow(context.Background(), "SELECT $1::text::jsonb IS NOT NULL", doc).Scan(&ok)
		p := jsonb.Check([]byte(doc))
		require.Equal(t, err == nil, storable(p), "PostgreSQL: %v; Check: %v; doc: %q", err, p, doc)
	})
}

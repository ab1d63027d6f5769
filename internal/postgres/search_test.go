package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

func TestCompileSearch(t *testing.T) {
	const u1, u2 = "0193a0b2-1c2d-7e3f-8a9b-0c1d2e3f4a5b", "0193a0b2-1c2d-7e3f-8a9b-0c1d2e3f4a5c"
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	noon := time.Date(2024, 5, 1, 12, 30, 0, 500_000_000, time.UTC)
	// Spec comparisons other than = != in walk the path twice: once for its JSON type, once for the value.
	const replicasGT = "COALESCE(jsonb_typeof((spec -> ?::text)) = 'number' AND (spec -> ?::text) > to_jsonb(?::numeric), false)"

	tests := []struct {
		expr      string
		hasParent bool
		sql       string
		args      []any
	}{
		{"   ", false, "TRUE", nil},

		// Text columns.
		{"name = 'a'", false, "(name = ?)", []any{"a"}},
		{"name != 'a'", false, "(name <> ?)", []any{"a"}},
		{"name <> 'a'", false, "(name <> ?)", []any{"a"}},
		{"name < 'b'", false, "(name < ?)", []any{"b"}},
		{"name <= 'b'", false, "(name <= ?)", []any{"b"}},
		{"name > 'b'", false, "(name > ?)", []any{"b"}},
		{"name >= 'b'", false, "(name >= ?)", []any{"b"}},
		{"name like 'a%'", false, "(name LIKE ?)", []any{"a%"}},
		{"name ilike 'A\\\\%'", false, "(name ILIKE ?)", []any{"A\\%"}},
		{"name not like 'a%'", false, "(NOT (name LIKE ?))", []any{"a%"}},
		{"name in ['a', \"b\"]", false, "(name IN (?, ?))", []any{"a", "b"}},
		{"name in ('a')", false, "(name IN (?))", []any{"a"}},
		{"name not in ['a']", false, "(NOT (name IN (?)))", []any{"a"}},
		{"name between 'a' and 'c'", false, "(name BETWEEN ? AND ?)", []any{"a", "c"}},
		{"name not between 'a' and 'c'", false, "(NOT (name BETWEEN ? AND ?))", []any{"a", "c"}},
		{"name is null", false, "(name IS NULL)", nil},
		{"name is not null", false, "(NOT (name IS NULL))", nil},
		{"status.phase = 'Ready'", false, "(phase = ?)", []any{"Ready"}},
		// TSL lexes dates and times even in quotes; a text field gets the text as written.
		{"name = '2024-05-01'", false, "(name = ?)", []any{"2024-05-01"}},
		{"name = 2024-05-01T12:30:00.500+00:00", false, "(name = ?)", []any{"2024-05-01T12:30:00.500+00:00"}},

		// UUID columns: as uuid when every value is one, else as text.
		{"id = '" + strings.ToUpper(u1) + "'", false, "(id = ?::uuid)", []any{u1}},
		{"id != '" + u1 + "'", false, "(id <> ?::uuid)", []any{u1}},
		{"id in ['" + u1 + "', '" + u2 + "']", false, "(id IN (?::uuid, ?::uuid))", []any{u1, u2}},
		{"id in ['" + u1 + "', 'x']", false, "(id::text IN (?, ?))", []any{u1, "x"}},
		{"id = 'abc'", false, "(id::text = ?)", []any{"abc"}},
		{"id like '0193%'", false, "(id::text LIKE ?)", []any{"0193%"}},
		{"id > '" + u1 + "'", false, "(id > ?::uuid)", []any{u1}},
		{"owner_id = '" + u1 + "'", true, "(parent_id = ?::uuid)", []any{u1}},
		{"owner_id ilike '0193%'", true, "(parent_id::text ILIKE ?)", []any{"0193%"}},

		// Integer and time columns.
		{"generation = 3", false, "(generation = ?)", []any{int64(3)}},
		{"generation = 0", false, "(generation = ?)", []any{int64(0)}},
		{"generation = 2k", false, "(generation = ?)", []any{int64(2000)}}, // TSL reads size suffixes
		{"spec.x = -0.0e5", false, "(spec @> ?::jsonb)", []any{`{"x":-0}`}},
		{"spec.x = 1e-400", false, "(spec @> ?::jsonb)", []any{`{"x":0}`}}, // underflow rounds to 0
		{"generation > -2", false, "(generation > ?)", []any{int64(-2)}},
		{"generation in [1, 2]", false, "(generation IN (?, ?))", []any{int64(1), int64(2)}},
		{"generation between 1 and 3", false, "(generation BETWEEN ? AND ?)", []any{int64(1), int64(3)}},
		{"created_time >= 2024-05-01", false, "(created_time >= ?)", []any{day}},
		{"updated_time < '2024-05-01T12:30:00.5Z'", false, "(updated_time < ?)", []any{noon}},
		{"created_time between 2024-05-01 and 2024-05-01T12:30:00.5Z", false, "(created_time BETWEEN ? AND ?)", []any{day, noon}},
		{"deleted_time = 2024-05-01", false, "(COALESCE(deleted_time = ?, false))", []any{day}},
		{"deleted_time != 2024-05-01", false, "(deleted_time IS DISTINCT FROM ?)", []any{day}},
		{"deleted_time in [2024-05-01]", false, "(COALESCE(deleted_time IN (?), false))", []any{day}},
		{"deleted_time is null", false, "(deleted_time IS NULL)", nil},

		// Labels: = != in by containment, the rest on the text value.
		{"labels.env = 'prod'", false, "(labels @> ?::jsonb)", []any{`{"env":"prod"}`}},
		{"labels.app.kubernetes.io/name = 'x'", false, "(labels @> ?::jsonb)", []any{`{"app.kubernetes.io/name":"x"}`}},
		{"labels[app-name] = 'x'", false, "(labels @> ?::jsonb)", []any{`{"app-name":"x"}`}},
		{"labels['app-name'] = 'x'", false, "(labels @> ?::jsonb)", []any{`{"app-name":"x"}`}},
		{"labels.env != 'prod'", false, "(NOT (labels @> ?::jsonb))", []any{`{"env":"prod"}`}},
		{"labels.env in ['a', 'b']", false, "((labels @> ?::jsonb OR labels @> ?::jsonb))", []any{`{"env":"a"}`, `{"env":"b"}`}},
		{"labels.env not in ['a']", false, "(NOT (labels @> ?::jsonb))", []any{`{"env":"a"}`}},
		{"labels.env like 'p%'", false, "(COALESCE((labels ->> ?::text) LIKE ?, false))", []any{"env", "p%"}},
		{"labels.env > 'a'", false, "(COALESCE((labels ->> ?::text) > ?, false))", []any{"env", "a"}},
		{"labels.env between 'a' and 'b'", false, "(COALESCE((labels ->> ?::text) BETWEEN ? AND ?, false))", []any{"env", "a", "b"}},
		{"labels.env is null", false, "((labels ->> ?::text) IS NULL)", []any{"env"}},
		{"labels.env is not null", false, "(NOT ((labels ->> ?::text) IS NULL))", []any{"env"}},

		// Spec: = != in by containment, typed comparisons on jsonb, like on the text value.
		{"spec.region = 'eu'", false, "(spec @> ?::jsonb)", []any{`{"region":"eu"}`}},
		{"spec.platform.hivelocity.region = 'eu'", false, "(spec @> ?::jsonb)", []any{`{"platform":{"hivelocity":{"region":"eu"}}}`}},
		{"spec.replicas = 3", false, "(spec @> ?::jsonb)", []any{`{"replicas":3}`}},
		{"spec.ratio = -0.5", false, "(spec @> ?::jsonb)", []any{`{"ratio":-0.5}`}},
		{"spec.enabled = true", false, "(spec @> ?::jsonb)", []any{`{"enabled":true}`}},
		{"spec[os-name] = 'x'", false, "(spec @> ?::jsonb)", []any{`{"os-name":"x"}`}},
		{"spec.platform['x-y'].z = 1", false, "(spec @> ?::jsonb)", []any{`{"platform":{"x-y":{"z":1}}}`}},
		{"spec.replicas != 3", false, "(NOT (spec @> ?::jsonb))", []any{`{"replicas":3}`}},
		{"spec.replicas in [1, 'one']", false, "((spec @> ?::jsonb OR spec @> ?::jsonb))", []any{`{"replicas":1}`, `{"replicas":"one"}`}},
		{"spec.replicas > 2", false, "(" + replicasGT + ")", []any{"replicas", "replicas", float64(2)}},
		{"not (spec.replicas > 2)", false, "(NOT (" + replicasGT + "))", []any{"replicas", "replicas", float64(2)}},
		{"spec.a.b <= 2.5", false,
			"(COALESCE(jsonb_typeof((spec -> ?::text -> ?::text)) = 'number' AND (spec -> ?::text -> ?::text) <= to_jsonb(?::numeric), false))",
			[]any{"a", "b", "a", "b", 2.5}},
		{"spec.version >= '4.14'", false,
			"(COALESCE(jsonb_typeof((spec -> ?::text)) = 'string' AND (spec -> ?::text) >= to_jsonb(?::text), false))",
			[]any{"version", "version", "4.14"}},
		{"spec.replicas between 1 and 3", false,
			"(COALESCE(jsonb_typeof((spec -> ?::text)) = 'number' AND (spec -> ?::text) BETWEEN to_jsonb(?::numeric) AND to_jsonb(?::numeric), false))",
			[]any{"replicas", "replicas", float64(1), float64(3)}},
		{"spec.region like 'eu%'", false, "(COALESCE((spec ->> ?::text) LIKE ?, false))", []any{"region", "eu%"}},
		{"spec.a.b ilike 'x'", false, "(COALESCE((spec -> ?::text ->> ?::text) ILIKE ?, false))", []any{"a", "b", "x"}},
		{"spec.region is null", false, "((spec ->> ?::text) IS NULL)", []any{"region"}},

		// Conditions, by containment.
		{"status.conditions.Ready = 'True'", false, "(conditions @> ?::jsonb)", []any{`[{"status":"True","type":"Ready"}]`}},
		{"status.conditions.Ready != 'True'", false, "(NOT (conditions @> ?::jsonb))", []any{`[{"status":"True","type":"Ready"}]`}},
		{"status.conditions.Ready in ['False', 'Unknown']", false, "((conditions @> ?::jsonb OR conditions @> ?::jsonb))",
			[]any{`[{"status":"False","type":"Ready"}]`, `[{"status":"Unknown","type":"Ready"}]`}},
		{"status.conditions.Ready is null", false, "(NOT (conditions @> ?::jsonb))", []any{`[{"type":"Ready"}]`}},
		{"status.conditions.Ready is not null", false, "(NOT (NOT (conditions @> ?::jsonb)))", []any{`[{"type":"Ready"}]`}},

		// Logic.
		{"name = 'a' and (generation = 1 or not (status.phase = 'Ready'))", false,
			"(name = ? AND (generation = ? OR NOT (phase = ?)))", []any{"a", int64(1), "Ready"}},
		{"name = 'a' or name = 'b' and name = 'c'", false, "(name = ? OR (name = ? AND name = ?))", []any{"a", "b", "c"}},
		{"name = 'a' and name = 'b' and (name = 'c' and name = 'd')", false,
			"(name = ? AND name = ? AND name = ? AND name = ?)", []any{"a", "b", "c", "d"}},
		{"name between 'a' and 'b' and name = 'c'", false, "(name BETWEEN ? AND ? AND name = ?)", []any{"a", "b", "c"}},
		{"not (not (name = 'a'))", false, "(NOT (NOT (name = ?)))", []any{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			sql, args, err := CompileSearch(tt.expr, tt.hasParent, nil)
			require.NoError(t, err)
			require.Equal(t, tt.sql, sql)
			require.Equal(t, tt.args, args)
		})
	}
}

func TestCompileSearchErrors(t *testing.T) {
	tests := []struct {
		name      string
		expr      string
		hasParent bool
		want      []string // substrings of the message
	}{
		{"syntax: incomplete", "name = ", false, []string{"does not parse", "at the end"}},
		{"syntax: stray paren", "name = 'a' )", false, []string{"does not parse", "at position 11"}},
		{"syntax: unterminated string", "name = 'a", false, []string{"unterminated string at position 7"}},
		{"syntax: SQL list", "name in ('a', 'b')", false, []string{"at position 12", "in ['a', 'b']"}},
		{"syntax: bad character", "name = 'a'; drop table clusters", false, []string{"unexpected character ';' at position 10"}},
		{"too long", "name = '" + strings.Repeat("a", 4096) + "'", false, []string{"4105 bytes", "limit is 4096"}},
		{"too many terms", "name in [" + strings.Repeat("'a', ", 200) + "]", false, []string{"more than 200 terms"}},

		{"unknown field", "foo = 1", false, []string{`unknown field "foo" at position 0`, "labels.<key>"}},
		{"unknown field after and", "name = 'a' and foo = 1", false, []string{`unknown field "foo" at position 15`}},
		{"case-sensitive field", "NAME = 'a'", false, []string{`unknown field "NAME"`}},
		{"status without phase or conditions", "status.other = 'x'", false, []string{`unknown field "status.other"`}},
		{"bare status", "status = 'x'", false, []string{`unknown field "status"`}},
		{"owner_id of a root kind", "owner_id = 'x'", false, []string{"owner_id", "no owner"}},
		{"owner_id listed for a child kind", "x = 1", true, []string{"owner_id"}},
		{"bare labels", "labels = 'x'", false, []string{`field "labels"`, "label key"}},
		{"empty label key", "labels. = 'x'", false, []string{`field "labels."`, "label key"}},
		{"label key with a non-ASCII letter", "labels.ä = 'x'", false, []string{"label key"}},
		{"label key too long", "labels." + strings.Repeat("k", 64) + " = 'x'", false, []string{"label key"}},
		{"label key with a quote in brackets", "labels[a'b] = 'x'", false, []string{"label key"}},
		{"bare spec", "spec = 'x'", false, []string{`field "spec"`, "spec.<path>"}},
		{"empty spec segment", "spec.a..b = 1", false, []string{"spec.<path>"}},
		{"spec path too deep", "spec" + strings.Repeat(".a", 17) + " = 1", false, []string{"at most 16 segments"}},
		{"spec segment with a dot in brackets", "spec[a.b] = 1", false, []string{"spec.<path>"}},
		{"bare conditions", "status.conditions = 'True'", false, []string{"status.conditions.<Type>"}},

		{"unsupported operator", "name ~= 'a'", false, []string{"operator ~=", "not supported"}},
		{"arithmetic", "generation = 1 + 1", false, []string{"expected a value at position 13"}},
		{"field on the right", "name = status.phase", false, []string{`found "status.phase"`}},
		{"unquoted text", "labels.env = prod", false, []string{`found "prod"; quote text: 'prod'`}},
		{"value on the left", "'a' = name", false, []string{"left side of = at position 0 must be a field"}},
		{"not binds to the field", "not name = 'a'", false, []string{"write not (field = value)"}},
		{"bare field", "name", false, []string{"expected a condition"}},
		{"bare literal", "true", false, []string{"expected a condition"}},
		{"literal in and", "name = 'a' and 'b'", false, []string{"expected a condition such as name = 'x' at position 15"}},
		{"list as a value", "name = ['a']", false, []string{"not an expression or list"}},
		{"empty list", "name in []", false, []string{"list is empty"}},
		{"minus on text", "name = -'a'", false, []string{"minus sign applies to numbers only, not to the value at position 8"}},

		{"number for a text field", "name = 1", false, []string{"name compares with text, not 1"}},
		{"boolean for a label", "labels.env = true", false, []string{"labels.env compares with text, not true"}},
		{"boolean for a condition", "status.conditions.Ready = true", false, []string{"compares with text"}},
		{"number for a uuid", "id = 1", false, []string{"id compares with text"}},
		{"text for generation", "generation = '1'", false, []string{`generation compares with an integer, not "1"`}},
		{"fraction for generation", "generation in [1, 1.5]", false, []string{"not 1.5 at position 18"}},
		{"generation out of range", "generation = 1e19", false, []string{"compares with an integer"}},
		{"text for a time", "created_time > 'yesterday'", false, []string{"RFC 3339", `not "yesterday"`}},
		{"impossible date", "created_time > 2024-13-01", false, []string{"RFC 3339"}},
		{"impossible time", "updated_time > 2024-01-01T25:00:00Z", false, []string{"RFC 3339"}},
		{"number for a time", "deleted_time > 1", false, []string{"RFC 3339"}},
		{"boolean ordering on spec", "spec.a > true", false, []string{"compare with numbers or with text, not true"}},
		{"mixed between on spec", "spec.a between 1 and 'b'", false, []string{`not "b"`}},
		{"like on spec with a number", "spec.a like 1", false, []string{"spec.a like: the pattern at position 12 must be text"}},
		{"like on generation", "generation like '1%'", false, []string{"generation at position 0: like applies to text fields only"}},
		{"ilike on a time", "created_time ilike '2024%'", false, []string{"ilike applies to text fields only"}},
		{"ordering on a condition", "status.conditions.Ready > 'A'", false, []string{"a condition supports =, !="}},
		{"like on a condition", "status.conditions.Ready like 'T%'", false, []string{"not like"}},
		{"like pattern ending in an escape", "name like 'a\\\\'", false, []string{"ends with the escape character"}},
		{"like pattern ending in an escape on a label", "labels.a ilike '\\\\\\\\\\\\'", false, []string{"ends with the escape character"}},
		{"NUL in text", "name = 'a\x00'", false, []string{"NUL"}},
		{"infinite number", "spec.x = 1e300P", false, []string{"out of range"}},
		{"number too large for float64", "spec.x > 1e400", false, []string{"number at position 9 is malformed or out of range"}},
		{"malformed number", "generation = 1e+", false, []string{"malformed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sql, args, err := CompileSearch(tt.expr, tt.hasParent, nil)
			var re *resource.Error
			require.ErrorAs(t, err, &re, "got SQL %s %v", sql, args)
			require.Equal(t, resource.CodeBadSearch, re.Code)
			for _, w := range tt.want {
				require.Contains(t, re.Message, w)
			}
		})
	}
}

// A hidden spec path is refused with the very message an unknown field gets, wherever it is in the expression
// and however deep below the hidden field; the paths beside it compile.
func TestCompileSearchHidden(t *testing.T) {
	hidden := func(path []string) bool { return len(path) >= 2 && path[0] == "a" && path[1] == "secret" }
	unknown := func(field string) string {
		_, _, err := CompileSearch(field+" = 'x'", false, nil)
		var re *resource.Error
		require.ErrorAs(t, err, &re)
		return re.Message
	}
	tests := []struct {
		expr string
		want string // the error, or "" to compile
	}{
		{"spec.a.secret = 'x'", strings.Replace(unknown("nosuch"), `"nosuch"`, `"spec.a.secret"`, 1)},
		{"spec.a.secret.deeper like 'a%'", "unknown field \"spec.a.secret.deeper\" at position 0"},
		{"spec.a[secret] = 'x'", "unknown field \"spec.a[secret]\""},
		{"name = 'n' or not (spec.a.secret is null)", "unknown field \"spec.a.secret\" at position 19"},
		{"spec.a.public = 'x'", ""},
		{"spec.a = 'x'", ""},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, _, err := CompileSearch(tt.expr, false, hidden)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			var re *resource.Error
			require.ErrorAs(t, err, &re)
			require.Equal(t, resource.CodeBadSearch, re.Code)
			require.Contains(t, re.Message, tt.want)
		})
	}
}

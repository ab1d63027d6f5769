package postgres

// The SQL that each family of search fields compiles to; search.go parses and resolves the expression.

import (
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/yaacov/tree-search-language/v6/pkg/parser"
)

// values converts vals to the bind arguments of f: int64 for generation, time.Time for times (RFC 3339, or a
// date meaning midnight UTC), strings for everything else.
func values(f field, vals []literal) ([]any, error) {
	out := make([]any, len(vals))
	for i, v := range vals {
		switch f.kind {
		case fieldInt:
			// 2^63 is exact in float64; anything at or past it does not fit an int64.
			n, ok := v.val.(float64)
			if !ok || n != math.Trunc(n) || n < -(1<<63) || n >= 1<<63 {
				return nil, badSearch("%s compares with an integer, not %s at position %d", f.name, v, v.pos)
			}
			out[i] = int64(n)
		case fieldTime:
			s, _ := v.val.(string)
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t, err = time.Parse(time.DateOnly, s)
			}
			if err != nil {
				return nil, badSearch("%s compares with an RFC 3339 time (2024-05-01T12:00:00Z) or a date "+
					"(2024-05-01), not %s at position %d", f.name, v, v.pos)
			}
			out[i] = t
		default:
			s, ok := v.val.(string)
			if !ok {
				return nil, badSearch("%s compares with text, not %s at position %d; quote it: '%s'", f.name, v, v.pos, v)
			}
			out[i] = s
		}
	}
	return out, nil
}

// checkLike rejects a pattern that ends in a lone escape character, for which Postgres raises an error, and
// only once a row gets that far in the match, so it must be caught here.
func checkLike(f field, op parser.OpType, vals []literal) error {
	pattern, ok := vals[0].val.(string)
	if !ok {
		return badSearch("%s %s: the pattern at position %d must be text", f.name, opName(op), vals[0].pos)
	}
	escaped := false
	for _, r := range pattern {
		escaped = !escaped && r == '\\'
	}
	if escaped {
		return badSearch("%s %s: the pattern at position %d ends with the escape character \\", f.name, opName(op), vals[0].pos)
	}
	return nil
}

// sqlOp spells a comparison operator in SQL.
func sqlOp(op parser.OpType) string {
	if op == parser.OpNE {
		return "<>"
	}
	return op.String() // = < <= > >= LIKE ILIKE
}

// columnComparison compiles a comparison on a typed column.
func (c *compiler) columnComparison(f field, op parser.OpType, vals []literal) (string, error) {
	if op == parser.OpIs {
		return f.column + " IS NULL", nil
	}
	like := op == parser.OpLike || op == parser.OpILike
	if like && (f.kind == fieldInt || f.kind == fieldTime) {
		return "", badSearch("%s at position %d: %s applies to text fields only", f.name, f.pos, opName(op))
	}
	if like {
		if err := checkLike(f, op, vals); err != nil {
			return "", err
		}
	}
	args, err := values(f, vals)
	if err != nil {
		return "", err
	}
	col, cast := f.column, ""
	if f.kind == fieldUUID {
		// A uuid column compares as uuid, which its indexes serve, when every value is a UUID; otherwise as
		// text, so that `id like '0193%'` works and a malformed id matches nothing instead of failing a cast.
		col, cast = f.column+"::text", ""
		if ids, ok := parseUUIDs(args); ok && !like {
			col, cast, args = f.column, "::uuid", ids
		}
	}
	ph := make([]string, len(args))
	for i, a := range args {
		ph[i] = c.arg(a) + cast
	}
	var sql string
	switch op {
	case parser.OpIn:
		sql = col + " IN (" + strings.Join(ph, ", ") + ")"
	case parser.OpBetween:
		sql = col + " BETWEEN " + ph[0] + " AND " + ph[1]
	case parser.OpNE:
		if f.nullable {
			return col + " IS DISTINCT FROM " + ph[0], nil // two-valued already
		}
		sql = col + " <> " + ph[0]
	default:
		sql = col + " " + sqlOp(op) + " " + ph[0]
	}
	if f.nullable {
		sql = "COALESCE(" + sql + ", false)"
	}
	return sql, nil
}

// parseUUIDs returns ids in canonical form if they are all UUIDs.
func parseUUIDs(ids []any) ([]any, bool) {
	out := make([]any, len(ids))
	for i, id := range ids {
		u, err := uuid.Parse(id.(string))
		if err != nil {
			return nil, false
		}
		out[i] = u.String()
	}
	return out, true
}

// containment compiles = != in as containment of one of docs in column, the form that the GIN jsonb_path_ops
// index serves; != negates it.
func (c *compiler) containment(column string, op parser.OpType, docs []any) (string, error) {
	parts := make([]string, len(docs))
	for i, d := range docs {
		arg, err := c.jsonArg(d)
		if err != nil {
			return "", err
		}
		parts[i] = column + " @> " + arg // "@> " keeps its space: GORM's named-argument scan needs it
	}
	sql := parts[0]
	if len(parts) > 1 {
		sql = "(" + strings.Join(parts, " OR ") + ")"
	}
	if op == parser.OpNE {
		return "NOT (" + sql + ")", nil
	}
	return sql, nil
}

// labelComparison compiles a comparison on labels.<key>: = != in by containment, the others on the value.
func (c *compiler) labelComparison(f field, op parser.OpType, vals []literal) (string, error) {
	args, err := values(f, vals)
	if err != nil {
		return "", err
	}
	switch op {
	case parser.OpEQ, parser.OpNE, parser.OpIn:
		docs := make([]any, len(args))
		for i, s := range args {
			docs[i] = map[string]any{f.key: s}
		}
		return c.containment("labels", op, docs)
	}
	return c.textComparison(f, op, "(labels ->> "+c.arg(f.key)+"::text)", vals)
}

// textComparison compiles < <= > >= like ilike between and is null on value, a text expression that is NULL
// when the key is missing; the comparisons are false then.
func (c *compiler) textComparison(f field, op parser.OpType, value string, vals []literal) (string, error) {
	switch op {
	case parser.OpIs:
		return value + " IS NULL", nil
	case parser.OpLike, parser.OpILike:
		if err := checkLike(f, op, vals); err != nil {
			return "", err
		}
	}
	args, err := values(field{name: f.name, kind: fieldText}, vals)
	if err != nil {
		return "", err
	}
	if op == parser.OpBetween {
		lo := c.arg(args[0])
		return "COALESCE(" + value + " BETWEEN " + lo + " AND " + c.arg(args[1]) + ", false)", nil
	}
	return "COALESCE(" + value + " " + sqlOp(op) + " " + c.arg(args[0]) + ", false)", nil
}

// specValue walks path from spec through objects only (-> with a text key is NULL on an array, and containment
// does not descend into arrays either); the last step is ->> when text is wanted.
func (c *compiler) specValue(path []string, text bool) string {
	var b strings.Builder
	b.WriteString("(spec")
	for i, seg := range path {
		if text && i == len(path)-1 {
			b.WriteString(" ->> ")
		} else {
			b.WriteString(" -> ")
		}
		b.WriteString(c.arg(seg) + "::text")
	}
	b.WriteString(")")
	return b.String()
}

// specComparison compiles a comparison on spec.<path>.
func (c *compiler) specComparison(f field, op parser.OpType, vals []literal) (string, error) {
	switch op {
	case parser.OpEQ, parser.OpNE, parser.OpIn:
		docs := make([]any, len(vals))
		for i, v := range vals {
			docs[i] = v.val
			for j := len(f.path) - 1; j >= 0; j-- {
				docs[i] = map[string]any{f.path[j]: docs[i]}
			}
		}
		return c.containment("spec", op, docs)
	case parser.OpIs, parser.OpLike, parser.OpILike:
		return c.textComparison(f, op, c.specValue(f.path, true), vals)
	}
	// < <= > >= between compare jsonb with jsonb of the literal's type. jsonb orders across types (a boolean is
	// greater than any number), so the type is checked first; the comparison itself cannot raise an error.
	jsonType, cast := "number", "::numeric"
	if _, ok := vals[0].val.(string); ok {
		jsonType, cast = "string", "::text"
	}
	for _, v := range vals {
		_, isText := v.val.(string)
		_, isNum := v.val.(float64)
		if (!isNum || jsonType != "number") && (!isText || jsonType != "string") {
			return "", badSearch("%s %s at position %d: compare with numbers or with text, not %s",
				f.name, opName(op), f.pos, v)
		}
	}
	check := "jsonb_typeof(" + c.specValue(f.path, false) + ") = '" + jsonType + "'"
	value := c.specValue(f.path, false)
	bound := func(v literal) string { return "to_jsonb(" + c.arg(v.val) + cast + ")" }
	if op == parser.OpBetween {
		lo := bound(vals[0])
		return "COALESCE(" + check + " AND " + value + " BETWEEN " + lo + " AND " + bound(vals[1]) + ", false)", nil
	}
	return "COALESCE(" + check + " AND " + value + " " + sqlOp(op) + " " + bound(vals[0]) + ", false)", nil
}

// conditionComparison compiles a comparison on status.conditions.<Type>, by containment: = != in on the
// condition's status, and is null for "has no such condition".
func (c *compiler) conditionComparison(f field, op parser.OpType, vals []literal) (string, error) {
	switch op {
	case parser.OpIs:
		sql, err := c.containment("conditions", op, []any{[]map[string]string{{"type": f.key}}})
		return "NOT (" + sql + ")", err
	case parser.OpEQ, parser.OpNE, parser.OpIn:
		args, err := values(f, vals)
		if err != nil {
			return "", err
		}
		docs := make([]any, len(args))
		for i, s := range args {
			docs[i] = []map[string]any{{"type": f.key, "status": s}}
		}
		return c.containment("conditions", op, docs)
	}
	return "", badSearch("%s at position %d: a condition supports =, !=, in, not in, is null and is not null, not %s",
		f.name, f.pos, opName(op))
}

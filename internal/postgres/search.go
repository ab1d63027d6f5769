package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/yaacov/tree-search-language/v6/pkg/parser"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Limits on a search expression. They bound the work of parsing and the size of the SQL handed to Postgres; a
// real query is far smaller.
const (
	maxSearchBytes = 4096 // length of the expression
	maxSearchNodes = 200  // fields, literals, list elements and operators of the parsed tree
	maxSpecDepth   = 16   // segments of a spec path
)

var (
	// labelKey is a Kubernetes-style label key: an optional DNS-like prefix and a name of at most 63 characters.
	// Condition types follow the same rule.
	labelKey = regexp.MustCompile(`^([A-Za-z0-9._-]{1,253}/)?[A-Za-z0-9._-]{1,63}$`)
	// specSegment is one object key of a spec path.
	specSegment = regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`)
	// listInParens spots the SQL habit `in ('a', 'b')`, which TSL does not parse, to say so in the error.
	listInParens = regexp.MustCompile(`(?i)\bin\s*\(`)
)

// CompileSearch turns a TSL expression into a SQL boolean expression with `?` placeholders (GORM style) and its
// arguments. The SQL is parenthesised, so it can be ANDed with other conditions; it names columns only from a
// fixed whitelist, and every literal, label key and spec path segment is a bind argument. A blank expression
// means "no filter" and compiles to TRUE.
//
// Search fields: id, name, generation, created_time, updated_time, deleted_time, owner_id (only when hasParent),
// labels.<key>, spec.<dotted.path>, status.phase, status.conditions.<Type>. A label key or spec segment that TSL
// cannot spell in an identifier (one with a dash) goes in brackets: labels[app-name], spec.platform[os-name].
// Operators: = != < <= > >= like ilike, in [..], not in [..], between, not between, is null, is not null,
// and, or, not, parentheses. Lists use brackets: TSL does not parse `in ('a', 'b')`. TSL binds not tighter
// than a comparison, so a negated comparison needs parentheses: not (name = 'a').
//
// Every comparison is two-valued: a comparison with a missing label, spec path or condition, or with a null
// deleted_time, is false, and `not` and `!=` are its exact complement. So `labels.env != 'prod'` matches
// resources without an env label, and `spec.replicas > 2` never matches a missing or non-numeric replicas.
// Spec values compare by JSON type (a number literal matches JSON numbers, a string literal JSON strings), and
// spec paths walk objects only, never into arrays.
//
// hidden, when not nil, names the spec paths the caller may not see (resource.SpecSchema.IsInternal): a field on
// one of them is refused with the same error as an unknown field, so that the answer does not tell a hidden field
// from a missing one.
//
// A bad expression returns a *resource.Error with Code resource.CodeBadSearch whose Message says what is wrong:
// for a syntax error the 0-based character position, otherwise the field, operator or value at fault. The SQL
// of an accepted expression does not raise an error in Postgres, whatever the rows hold.
//
// CompileSearch is safe for concurrent use.
func CompileSearch(expr string, hasParent bool, hidden func(path []string) bool) (string, []any, error) {
	if strings.TrimSpace(expr) == "" {
		return "TRUE", nil, nil
	}
	if len(expr) > maxSearchBytes {
		return "", nil, badSearch("search expression is %d bytes long; the limit is %d", len(expr), maxSearchBytes)
	}
	tree, err := parser.Parse(expr)
	if err != nil {
		return "", nil, syntaxError(expr, err)
	}
	if countNodes(tree, maxSearchNodes+1) > maxSearchNodes {
		return "", nil, badSearch("search expression has more than %d terms", maxSearchNodes)
	}
	c := &compiler{expr: expr, hasParent: hasParent, hidden: hidden}
	sql, err := c.condition(tree)
	if err != nil {
		return "", nil, err
	}
	return "(" + sql + ")", c.args, nil
}

func badSearch(format string, args ...any) error {
	return resource.Errorf(resource.CodeBadSearch, format, args...)
}

// syntaxError turns a parse error into a client error that points at the offending text.
func syntaxError(expr string, err error) error {
	var pe *parser.ParseError
	if !errors.As(err, &pe) {
		return badSearch("search expression does not parse: %v", err)
	}
	msg := pe.Message
	if msg != "" {
		msg = strings.ToLower(msg[:1]) + msg[1:]
	}
	runes := []rune(expr) // the lexer counts positions in runes
	where := "at the end"
	if pos := pe.Position; pos >= 0 && pos < len(runes) && strings.TrimSpace(string(runes[pos:])) != "" {
		near := runes[pos:]
		if len(near) > 20 {
			near = near[:20]
		}
		where = fmt.Sprintf("at position %d near %q", pos, string(near))
	}
	hint := ""
	if listInParens.MatchString(expr) {
		hint = "; lists are written in brackets: in ['a', 'b']"
	}
	return badSearch("search expression does not parse: %s %s%s", msg, where, hint)
}

// countNodes counts the nodes of n, giving up once it has seen limit of them.
func countNodes(n *parser.Node, limit int) int {
	if n == nil {
		return 0
	}
	count := 1
	for _, child := range append([]*parser.Node{n.Left, n.Right}, n.Children...) {
		if count >= limit {
			break
		}
		count += countNodes(child, limit-count)
	}
	return count
}

// compiler holds the state of one CompileSearch call.
type compiler struct {
	expr      string
	hasParent bool
	hidden    func(path []string) bool
	args      []any
	// tokens maps the position of each number and RFC 3339 token to its text, built on first need: the parser
	// keeps only the parsed value (a number it cannot parse becomes 0), and a text field must compare the time
	// that the client wrote as written.
	tokens map[int]string
}

// arg records v as the next bind argument and returns its placeholder.
func (c *compiler) arg(v any) string {
	c.args = append(c.args, v)
	return "?"
}

// jsonArg records v, marshalled, as a jsonb bind argument.
func (c *compiler) jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("search: encode %v: %w", v, err)
	}
	return c.arg(string(b)) + "::jsonb", nil
}

// condition compiles a node that must be a condition.
func (c *compiler) condition(n *parser.Node) (string, error) {
	if n == nil {
		return "", badSearch("expected a condition such as name = 'x'")
	}
	if n.Kind != parser.NodeBinaryExpr && n.Kind != parser.NodeUnaryExpr {
		return "", badSearch("expected a condition such as name = 'x' at position %d", n.Position)
	}
	switch n.Operator {
	case parser.OpAnd, parser.OpOr:
		l, err := c.operand(n.Left, n.Operator)
		if err != nil {
			return "", err
		}
		r, err := c.operand(n.Right, n.Operator)
		if err != nil {
			return "", err
		}
		return l + " " + n.Operator.String() + " " + r, nil
	case parser.OpNot:
		s, err := c.condition(n.Right)
		if err != nil {
			return "", err
		}
		return "NOT (" + s + ")", nil
	case parser.OpEQ, parser.OpNE, parser.OpLT, parser.OpLE, parser.OpGT, parser.OpGE, parser.OpLike,
		parser.OpILike, parser.OpIn, parser.OpBetween, parser.OpIs:
		return c.comparison(n)
	}
	return "", badSearch("operator %s (in the expression at position %d) is not supported in a search",
		opName(n.Operator), n.Position)
}

// operand compiles a condition that is an operand of op (and, or): parenthesised if it is an and/or of the
// other kind, so that `a or b and c` keeps its meaning and a chain of one kind stays flat.
func (c *compiler) operand(n *parser.Node, op parser.OpType) (string, error) {
	s, err := c.condition(n)
	if err == nil && n.Kind == parser.NodeBinaryExpr && n.Operator != op &&
		(n.Operator == parser.OpAnd || n.Operator == parser.OpOr) {
		s = "(" + s + ")"
	}
	return s, err
}

// comparison compiles `field op value(s)`.
func (c *compiler) comparison(n *parser.Node) (string, error) {
	if l := n.Left; l != nil && l.Kind == parser.NodeUnaryExpr && l.Operator == parser.OpNot {
		return "", badSearch("not at position %d applies to the field, not to the comparison; "+
			"write not (field %s value)", l.Position, opName(n.Operator))
	}
	if n.Left == nil || n.Left.Kind != parser.NodeIdentifier {
		return "", badSearch("the left side of %s at position %d must be a field", opName(n.Operator), n.Position)
	}
	f, err := c.field(n.Left)
	if err != nil {
		return "", err
	}
	var vals []literal
	switch n.Operator {
	case parser.OpIs: // the grammar builds only `is null`, with a null literal on the right
	case parser.OpIn, parser.OpBetween:
		elems := []*parser.Node{n.Right}
		if n.Right != nil && n.Right.Kind == parser.NodeArrayLiteral {
			elems = n.Right.Children
		} // else `in ('a')`, which parses as a parenthesised scalar: a list of one
		if len(elems) == 0 {
			return "", badSearch("%s in [] at position %d: the list is empty", f.name, n.Position)
		}
		for _, e := range elems {
			v, err := c.literal(e)
			if err != nil {
				return "", err
			}
			vals = append(vals, v)
		}
	default:
		v, err := c.literal(n.Right)
		if err != nil {
			return "", err
		}
		vals = append(vals, v)
	}
	switch f.kind {
	case fieldLabel:
		return c.labelComparison(f, n.Operator, vals)
	case fieldSpec:
		return c.specComparison(f, n.Operator, vals)
	case fieldCondition:
		return c.conditionComparison(f, n.Operator, vals)
	default: // a column of the resource table
		return c.columnComparison(f, n.Operator, vals)
	}
}

// opName spells op as a client writes it.
func opName(op parser.OpType) string {
	return strings.ToLower(op.String())
}

// fieldKind says how a field is stored, which decides the SQL it compiles to.
type fieldKind int

const (
	fieldText      fieldKind = iota // a text column
	fieldUUID                       // a uuid column
	fieldInt                        // a bigint column
	fieldTime                       // a timestamptz column
	fieldLabel                      // one key of the labels object
	fieldSpec                       // a path into the spec object
	fieldCondition                  // the status of one element of the conditions array, by type
)

// field is a resolved search field.
type field struct {
	name     string // as the client wrote it, for messages
	pos      int
	kind     fieldKind
	column   string // the SQL column: always a constant of this file, never client text
	nullable bool
	key      string   // label key or condition type
	path     []string // spec path
}

// field resolves an identifier against the whitelist of search fields.
func (c *compiler) field(n *parser.Node) (field, error) {
	id, _ := n.Value.(string)
	f := field{name: id, pos: n.Position}
	switch id {
	case "id":
		f.kind, f.column = fieldUUID, "id"
	case "owner_id":
		if !c.hasParent {
			return f, badSearch("field owner_id at position %d: this kind has no owner", n.Position)
		}
		f.kind, f.column = fieldUUID, "parent_id"
	case "name":
		f.kind, f.column = fieldText, "name"
	case "status.phase":
		f.kind, f.column = fieldText, "phase"
	case "generation":
		f.kind, f.column = fieldInt, "generation"
	case "created_time":
		f.kind, f.column = fieldTime, "created_time"
	case "updated_time":
		f.kind, f.column = fieldTime, "updated_time"
	case "deleted_time":
		f.kind, f.column, f.nullable = fieldTime, "deleted_time", true
	default:
		return c.pathField(f)
	}
	return f, nil
}

// pathField resolves labels.<key>, status.conditions.<Type> and spec.<path>.
func (c *compiler) pathField(f field) (field, error) {
	if rest, ok := cutField(f.name, "labels"); ok {
		f.kind, f.column = fieldLabel, "labels"
		if f.key, ok = singleKey(rest); !ok || !labelKey.MatchString(f.key) {
			return f, badSearch("field %q at position %d: a label key is [prefix/]name of letters, digits, "+
				"'.', '_' and '-', the name at most 63 characters; write keys with '-' as labels[my-key]", f.name, f.pos)
		}
		return f, nil
	}
	if rest, ok := cutField(f.name, "status.conditions"); ok {
		f.kind, f.column = fieldCondition, "conditions"
		if f.key, ok = singleKey(rest); !ok || !labelKey.MatchString(f.key) {
			return f, badSearch("field %q at position %d: expected status.conditions.<Type>, "+
				"the type of letters, digits, '.', '_' and '-'", f.name, f.pos)
		}
		return f, nil
	}
	if rest, ok := cutField(f.name, "spec"); ok {
		f.kind, f.column = fieldSpec, "spec"
		if f.path, ok = splitPath(rest); !ok || len(f.path) == 0 || len(f.path) > maxSpecDepth {
			return f, badSearch("field %q at position %d: expected spec.<path>, at most %d segments of letters, "+
				"digits, '_' and '-' (at most 63 each); write segments with '-' as spec.a[b-c]", f.name, f.pos, maxSpecDepth)
		}
		if c.hidden != nil && c.hidden(f.path) {
			return f, c.unknown(f)
		}
		return f, nil
	}
	return f, c.unknown(f)
}

// unknown is the error for a field that is not a search field, or that the caller may not see.
func (c *compiler) unknown(f field) error {
	fields := "id, name, generation, created_time, updated_time, deleted_time, labels.<key>, spec.<path>, " +
		"status.phase, status.conditions.<Type>"
	if c.hasParent {
		fields += ", owner_id"
	}
	return badSearch("unknown field %q at position %d; search fields are %s", f.name, f.pos, fields)
}

// cutField returns what follows prefix in id, if id is prefix itself or continues it with '.' or '['.
func cutField(id, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || (rest != "" && rest[0] != '.' && rest[0] != '[') {
		return "", false
	}
	return rest, true
}

// singleKey reads ".key" (the key may hold dots) or "[key]" (the key may be quoted).
func singleKey(rest string) (string, bool) {
	if strings.HasPrefix(rest, ".") {
		return rest[1:], true
	}
	if len(rest) >= 2 && rest[0] == '[' && strings.IndexByte(rest, ']') == len(rest)-1 {
		return unquote(rest[1 : len(rest)-1]), true
	}
	return "", false
}

// splitPath reads a spec path written as ".a.b[c-d]" into its segments, and checks each.
func splitPath(rest string) ([]string, bool) {
	var segs []string
	for rest != "" {
		var seg string
		switch rest[0] {
		case '.':
			end := strings.IndexAny(rest[1:], ".[") + 1
			if end == 0 {
				end = len(rest)
			}
			seg, rest = rest[1:end], rest[end:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, false
			}
			seg, rest = unquote(rest[1:end]), rest[end+1:]
		default:
			return nil, false
		}
		if !specSegment.MatchString(seg) {
			return nil, false
		}
		segs = append(segs, seg)
	}
	return segs, true
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// literal is a value of the expression: a string (quoted text, or a date or RFC 3339 time as written), a
// finite float64 or a bool.
type literal struct {
	val any
	pos int
}

func (v literal) String() string {
	if s, ok := v.val.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v.val)
}

// literal reads a value node.
func (c *compiler) literal(n *parser.Node) (literal, error) {
	if n == nil {
		return literal{}, badSearch("expected a value")
	}
	v := literal{val: n.Value, pos: n.Position}
	switch n.Kind {
	case parser.NodeStringLiteral, parser.NodeDateLiteral, parser.NodeNumericLiteral, parser.NodeBooleanLiteral:
	case parser.NodeTimestampLiteral:
		v.val = c.rawTimestamp(n)
	case parser.NodeUnaryExpr:
		if n.Operator != parser.OpUMinus {
			return v, badSearch("expected a value at position %d, not an expression", n.Position)
		}
		inner, err := c.literal(n.Right)
		if err != nil {
			return v, err
		}
		f, ok := inner.val.(float64)
		if !ok {
			return v, badSearch("a minus sign applies to numbers only, not to the value at position %d", inner.pos)
		}
		return literal{val: -f, pos: n.Position}, nil
	case parser.NodeIdentifier:
		return v, badSearch("expected a value at position %d, found %q; quote text: '%s'", n.Position, n.Value, n.Value)
	default:
		return v, badSearch("expected a value at position %d, not an expression or list", n.Position)
	}
	// Postgres text cannot hold NUL, and a number must survive JSON and numeric: say so now rather than fail there.
	if s, ok := v.val.(string); ok && strings.ContainsRune(s, 0) {
		return v, badSearch("the text at position %d contains a NUL character", n.Position)
	}
	if f, ok := v.val.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f) || f == 0 && !c.zero(n.Position)) {
		return v, badSearch("the number at position %d is malformed or out of range", n.Position)
	}
	return v, nil
}

// rawTimestamp returns the text of an RFC 3339 token as written.
func (c *compiler) rawTimestamp(n *parser.Node) string {
	if s, ok := n.Value.(string); ok { // the parser keeps the text of a time it cannot parse
		return s
	}
	if s, ok := c.token(n.Position); ok {
		return s
	}
	t, _ := n.Value.(time.Time)
	return t.Format(time.RFC3339Nano)
}

// token returns the text of the number or RFC 3339 token at pos.
func (c *compiler) token(pos int) (string, bool) {
	if c.tokens == nil {
		c.tokens = map[int]string{}
		lx := parser.NewLexer(c.expr)
		if lx.Tokenize() == nil {
			for tok := lx.NextToken(); tok.Type != parser.EOF; tok = lx.NextToken() {
				if tok.Type == parser.RFC3339 || tok.Type == parser.NUMERIC_LITERAL {
					c.tokens[tok.Position] = tok.Value
				}
			}
		}
	}
	s, ok := c.tokens[pos]
	return s, ok
}

// zero reports whether the number token at pos really is zero, not one that the parser failed to read (1e400,
// 1e+) and made 0.
func (c *compiler) zero(pos int) bool {
	text, ok := c.token(pos)
	_, err := strconv.ParseFloat(strings.TrimRight(text, "kKmMgGtTpPiI"), 64) // without a size suffix (5Ki)
	return ok && err == nil
}

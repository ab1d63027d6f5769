package postgres

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// orderKey is one column of a list's order.
type orderKey struct {
	col  string
	desc bool
}

// orderKeys validates order and completes it with id, which breaks ties so that every row has one place.
func orderKeys(order []resource.OrderBy) ([]orderKey, error) {
	if len(order) == 0 {
		return []orderKey{{col: "created_time"}, {col: "id"}}, nil
	}
	keys := make([]orderKey, 0, len(order)+1)
	for _, o := range order {
		col, ok := orderColumns[o.Field]
		if !ok {
			return nil, &resource.Error{Code: resource.CodeBadListParam, Message: fmt.Sprintf("cannot order by %q: use one of id, name, generation, created_time, updated_time", o.Field),
				Fields: []resource.FieldError{{Field: "order", Message: "unknown field " + o.Field}}}
		}
		keys = append(keys, orderKey{col: col, desc: o.Desc})
		if col == "id" {
			return keys, nil // unique: later keys never decide
		}
	}
	return append(keys, orderKey{col: "id"}), nil
}

func orderClause(keys []orderKey) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k.col
		if k.desc {
			parts[i] += " DESC"
		}
	}
	return strings.Join(parts, ", ")
}

// cursor is what an `after` cursor holds: the order it was made for and the last row's values of its keys.
type cursor struct {
	Order  string   `json:"o"`
	Values []string `json:"v"`
}

// nextCursor returns the cursor of the page that ends with w.
func nextCursor(keys []orderKey, w *row) string {
	c := cursor{Order: orderClause(keys), Values: make([]string, len(keys))}
	for i, k := range keys {
		switch k.col {
		case "id":
			c.Values[i] = w.ID
		case "name":
			c.Values[i] = w.Name
		case "generation":
			c.Values[i] = fmt.Sprint(w.Generation)
		case "created_time":
			c.Values[i] = w.CreatedTime.UTC().Format(time.RFC3339Nano)
		case "updated_time":
			c.Values[i] = w.UpdatedTime.UTC().Format(time.RFC3339Nano)
		}
	}
	raw, err := json.Marshal(c)
	if err != nil { // not reached: strings encode
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

// afterWhere returns the condition that keeps the rows after the cursor's row in the keys' order: the row
// comparison spelled out, since the keys may run in different directions.
func afterWhere(keys []orderKey, after string) (string, []any, error) {
	bad := func(msg string) error {
		return &resource.Error{Code: resource.CodeBadListParam, Message: "query parameter after " + msg,
			Fields: []resource.FieldError{{Field: "after", Message: msg}}}
	}
	raw, err := base64.RawURLEncoding.DecodeString(after)
	var c cursor
	if err != nil || json.Unmarshal(raw, &c) != nil {
		return "", nil, bad("is not a cursor this API gave out (the `next` of a list)")
	}
	if c.Order != orderClause(keys) || len(c.Values) != len(keys) {
		return "", nil, bad("was given out for another order: keep the order of the list it came from")
	}
	vals := make([]any, len(keys))
	for i, k := range keys {
		switch k.col {
		case "created_time", "updated_time":
			t, err := time.Parse(time.RFC3339Nano, c.Values[i])
			if err != nil {
				return "", nil, bad("holds a time that is not one")
			}
			vals[i] = t
		case "generation":
			g, err := strconv.ParseInt(c.Values[i], 10, 64)
			if err != nil {
				return "", nil, bad("holds a generation that is not one")
			}
			vals[i] = g
		case "id":
			// Checked here, so that a tampered cursor is the client's error, never a statement PostgreSQL refuses;
			// re-spelled, since uuid.Parse takes forms (urn:uuid:…) that PostgreSQL does not.
			id, err := uuid.Parse(c.Values[i])
			if err != nil {
				return "", nil, bad("holds an id that is not one")
			}
			vals[i] = id.String()
		case "name":
			if len(c.Values[i]) > 63 || strings.ContainsRune(c.Values[i], 0) {
				return "", nil, bad("holds a name that is not one")
			}
			vals[i] = c.Values[i]
		default: // not reached: orderColumns names the columns, and each has its case above
			return "", nil, bad("orders by a column this API does not")
		}
	}
	same := true
	for _, k := range keys {
		same = same && k.desc == keys[0].desc
	}
	if same {
		// A row comparison is an index range PostgreSQL seeks to; the OR spelled out below is not.
		cols := make([]string, len(keys))
		marks := make([]string, len(keys))
		for i, k := range keys {
			cols[i], marks[i] = k.col, "?"
		}
		op := " > "
		if keys[0].desc {
			op = " < "
		}
		return "(" + strings.Join(cols, ", ") + ")" + op + "(" + strings.Join(marks, ", ") + ")", vals, nil
	}
	// Mixed directions: the OR of the cases, behind a bound on the first key that the index can seek to.
	first := keys[0].col + " >= ?"
	if keys[0].desc {
		first = keys[0].col + " <= ?"
	}
	var ors []string
	args := []any{vals[0]}
	for i, k := range keys {
		var ands []string
		for j := range i {
			ands = append(ands, keys[j].col+" = ?")
			args = append(args, vals[j])
		}
		op := " > ?"
		if k.desc {
			op = " < ?"
		}
		ands = append(ands, k.col+op)
		args = append(args, vals[i])
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return first + " AND (" + strings.Join(ors, " OR ") + ")", args, nil
}

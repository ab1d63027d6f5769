package postgres

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// A cursor is the client's to send back, so every value in it is checked before it becomes a bind argument: a
// tampered one is a 400 (CodeBadListParam on `after`), never a statement PostgreSQL refuses.
func TestAfterWhereChecksTheCursor(t *testing.T) {
	byTime := []orderKey{{col: "created_time"}, {col: "id"}}
	byName := []orderKey{{col: "name"}, {col: "id"}}
	byGeneration := []orderKey{{col: "generation", desc: true}, {col: "id"}}
	const id = "0193a0b2-1c2d-7e3f-8a9b-0c1d2e3f4a5b"
	const when = "2024-05-01T12:00:00Z"
	cursorOf := func(keys []orderKey, values ...string) string {
		raw, err := json.Marshal(cursor{Order: orderClause(keys), Values: values})
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(raw)
	}
	tests := []struct {
		name    string
		keys    []orderKey
		after   string
		wantErr string // in the message; "" to succeed
		wantID  any
	}{
		{name: "as given out", keys: byTime, after: cursorOf(byTime, when, id), wantID: id},
		{name: "an id in upper case is re-spelled", keys: byTime, after: cursorOf(byTime, when, "0193A0B2-1C2D-7E3F-8A9B-0C1D2E3F4A5B"), wantID: id},
		{name: "an id in a form PostgreSQL does not take is re-spelled", keys: byTime, after: cursorOf(byTime, when, "urn:uuid:"+id), wantID: id},
		{name: "an id that is not one", keys: byTime, after: cursorOf(byTime, when, "' OR 1=1 --"), wantErr: "an id that is not one"},
		{name: "an empty id", keys: byTime, after: cursorOf(byTime, when, ""), wantErr: "an id that is not one"},
		{name: "a time that is not one", keys: byTime, after: cursorOf(byTime, "yesterday", id), wantErr: "a time that is not one"},
		{name: "a name with NUL", keys: byName, after: cursorOf(byName, "a\x00b", id), wantErr: "a name that is not one"},
		{name: "a name too long", keys: byName, after: cursorOf(byName, string(make([]byte, 64)), id), wantErr: "a name that is not one"},
		{name: "a generation with a tail", keys: byGeneration, after: cursorOf(byGeneration, "12abc", id), wantErr: "a generation that is not one"},
		{name: "a generation beyond int64", keys: byGeneration, after: cursorOf(byGeneration, "99999999999999999999", id), wantErr: "a generation that is not one"},
		{name: "another order", keys: byName, after: cursorOf(byTime, when, id), wantErr: "another order"},
		{name: "too few values", keys: byTime, after: cursorOf(byTime, when), wantErr: "another order"},
		{name: "not base64", keys: byTime, after: "!!!", wantErr: "not a cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, args, err := afterWhere(tt.keys, tt.after)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, tt.wantID, args[len(args)-1])
				return
			}
			var re *resource.Error
			require.ErrorAs(t, err, &re)
			require.Equal(t, resource.CodeBadListParam, re.Code)
			require.Equal(t, "after", re.Fields[0].Field)
			require.Contains(t, re.Message, tt.wantErr)
		})
	}
}

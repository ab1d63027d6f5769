package adapter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// answers is hyperfleet-api as Orphans sees it: the list of ids, and a GET by id answered from a table (an id it
// does not hold is a 404).
type answers struct {
	listed  map[string]bool
	get     map[string]error // nil: it exists (missing from the list: created since, say)
	listErr error
	gets    []string
}

func (a *answers) IDs(context.Context, *Kind) (map[string]bool, error) { return a.listed, a.listErr }

func (a *answers) Get(_ context.Context, _ *Kind, _, id string) (*Object, error) {
	a.gets = append(a.gets, id)
	err, ok := a.get[id]
	if !ok {
		return nil, &APIError{Op: "get", Status: 404, Code: "HYPERFLEET-NTF-001"}
	}
	if err != nil {
		return nil, err
	}
	return &Object{ID: id}, nil
}

// Only the API's 404 makes an orphan; its grace runs from the first check that saw it, on this replica; an id
// the API could not answer for keeps what it was; one no longer named, or that the API has after all, is forgotten.
func TestApplierSweepOrphans(t *testing.T) {
	api := &answers{listed: map[string]bool{"live": true}, get: map[string]error{"new": nil, "flaky": &APIError{Op: "get", Status: 503}}}
	o, err := NewOrphans(api, Clusters(), 10*time.Minute)
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	named := func(ids ...string) []Named {
		out := make([]Named, len(ids))
		for i, id := range ids {
			out[i] = Named{ID: id}
		}
		return out
	}

	check, err := o.Check(context.Background(), named("live", "new", "flaky", "gone", "gone"), t0)
	require.Error(t, err, "the 503 is said")
	require.Equal(t, []string{"gone"}, check.Found)
	require.Empty(t, check.Due)
	require.Equal(t, map[string]time.Time{"gone": t0}, check.Since)
	require.ElementsMatch(t, []string{"new", "flaky", "gone"}, api.gets, "only what the list lacks is asked about, once")

	api.get["flaky"] = nil
	delete(api.get, "new") // gone now too
	check, err = o.Check(context.Background(), named("live", "new", "flaky", "gone"), t0.Add(5*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []string{"new"}, check.Found)
	require.Empty(t, check.Due, "not before the grace")

	check, err = o.Check(context.Background(), named("new", "gone"), t0.Add(10*time.Minute))
	require.NoError(t, err)
	require.Empty(t, check.Found)
	require.Equal(t, []string{"gone"}, check.Due, "the grace runs from the first 404")

	api.listErr = errors.New("503")
	_, err = o.Check(context.Background(), named("new"), t0.Add(20*time.Minute))
	require.Error(t, err)
	api.listErr = nil
	check, err = o.Check(context.Background(), named("new"), t0.Add(20*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []string{"new"}, check.Due, "a failed list changes nothing")
	require.NotContains(t, check.Since, "gone", "no longer named: forgotten")

	api.listed["new"] = true // it reappears (a restored database)
	check, err = o.Check(context.Background(), named("new"), t0.Add(30*time.Minute))
	require.NoError(t, err)
	require.Empty(t, check.Since)
}

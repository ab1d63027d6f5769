package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

type historyOptions struct {
	output  *outputFlag
	cluster string
}

func newHistoryCommand(a *app) *cobra.Command {
	o := &historyOptions{}
	cmd := &cobra.Command{
		Use:   "history KIND NAME",
		Short: "Show who changed a resource, what and when",
		Long: `Shows a resource's history, oldest first: its creation, each update (the fields it changed), its
deletion, each move of its phase with the adapter report that caused it, and its removal. The history outlives
the resource: give a removed resource's id (and a node pool's --cluster as an id) to read it. -o json and yaml
show the entries as the API returns them, merge patches whole.`,
		Example:           "  hyperfleet history cluster demo\n  hyperfleet history nodepool workers --cluster demo -o json",
		Args:              usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: a.completeKindAndNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.history(cmd.Context(), o, args)
		},
	}
	o.output = a.addOutputFlag(cmd, formatTable, formatJSON, formatYAML)
	addClusterFlag(a, cmd, &o.cluster)
	return cmd
}

func (a *app) history(ctx context.Context, o *historyOptions, args []string) error {
	k, names, err := a.kindAndNames(args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usageErrorf("history shows one resource's: give its kind and name")
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	ref, name, err := c.historyRef(ctx, k, o.cluster, names[0])
	if err != nil {
		return err
	}
	list := api.HistoryList{Kind: "HistoryList", Items: []api.HistoryEntry{}}
	params := &api.HistoryParams{Size: ptr(1000)}
	for {
		answer, err := c.do(c.gen.ListResourceHistory(ctx, k, ref, params))
		if err != nil {
			return err
		}
		var page api.HistoryList
		if err := json.Unmarshal(answer, &page); err != nil {
			return fmt.Errorf("decode the history: %w", err)
		}
		list.Items = append(list.Items, page.Items...)
		if page.Next == nil {
			break
		}
		var after int64
		if _, err := fmt.Sscan(*page.Next, &after); err != nil {
			return fmt.Errorf("the history's next page %q: %w", *page.Next, err)
		}
		params.After = &after
	}
	if f := o.output.value; f == formatJSON || f == formatYAML {
		doc, err := json.Marshal(list)
		if err != nil {
			return fmt.Errorf("encode the history: %w", err)
		}
		return printDocument(a.stdout, f, doc)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(a.stderr, "No history of %s/%s.\n", k.Singular, name)
		return nil
	}
	return printHistory(a.stdout, list.Items)
}

// historyRef finds the resource whose history to read: by name or id among the resources there are, or, for an
// id that none has (a removed resource, whose history stays), that id as it is.
func (c *client) historyRef(ctx context.Context, k *api.Kind, cluster, nameOrID string) (api.ResourceRef, string, error) {
	obj, err := c.resolve(ctx, k, cluster, nameOrID, true)
	if err == nil {
		return obj.ref(), obj.name(), nil
	}
	var nf *notFoundError
	id, notID := uuid.Parse(nameOrID)
	if !errors.As(err, &nf) || notID != nil {
		return api.ResourceRef{}, "", err
	}
	ref := api.ResourceRef{ID: id}
	if k.Parent != nil {
		parent, err := uuid.Parse(cluster)
		if err != nil {
			return api.ResourceRef{}, "", usageErrorf("%s %s is not there: to read a removed %s's history, give its %s's id with --%s",
				k.Singular, nameOrID, k.Singular, k.Parent.Singular, k.Parent.Singular)
		}
		ref.Parent = parent
	}
	return ref, nameOrID, nil
}

// maxChanges is how much of an entry's changes the table shows.
const maxChanges = 80

// printHistory prints TIME, ACTOR, ACTION, GENERATION, PHASE (from->to when the entry moved it) and CHANGES: the
// fields an update set (path=value) or removed (-path), or the report of a status entry, cut to maxChanges.
func printHistory(w io.Writer, items []api.HistoryEntry) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "TIME\tACTOR\tACTION\tGENERATION\tPHASE\tCHANGES")
	for i := range items {
		e := &items[i]
		row := []string{e.Time.UTC().Format(time.RFC3339), e.Actor, string(e.Action), fmt.Sprint(e.Generation),
			historyPhase(e), abbreviate(historyChanges(e), maxChanges)}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func historyPhase(e *api.HistoryEntry) string {
	from, to := string(deref(e.PhaseFrom)), string(deref(e.PhaseTo))
	switch {
	case from == "" && to == "":
		return "<none>"
	case from == "":
		return to
	}
	return from + "->" + to
}

func historyChanges(e *api.HistoryEntry) string {
	if e.Reports != nil && len(*e.Reports) > 0 {
		var parts []string
		for _, r := range *e.Reports {
			parts = append(parts, fmt.Sprintf("%s@%d: %s", r.Adapter, r.ObservedGeneration, conditionsSummary(r.Conditions)))
		}
		return strings.Join(parts, "; ")
	}
	if e.Changes == nil {
		return "<none>"
	}
	var fields []string
	flattenChanges("", *e.Changes, &fields)
	sort.Slice(fields, func(i, j int) bool { return strings.TrimPrefix(fields[i], "-") < strings.TrimPrefix(fields[j], "-") })
	return orNone(strings.Join(fields, ", "))
}

// flattenChanges lists a merge patch's leaves as path=value, and its nulls (removals) as -path.
func flattenChanges(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || (len(m) == 0 && prefix != "") {
		switch x := v.(type) {
		case nil:
			*out = append(*out, "-"+prefix)
		case string:
			*out = append(*out, prefix+"="+x)
		default:
			raw, _ := json.Marshal(x) //nolint:errcheck // a decoded JSON value encodes
			*out = append(*out, prefix+"="+string(raw))
		}
		return
	}
	for k, child := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		flattenChanges(path, child, out)
	}
}

// abbreviate cuts s to at most n runes, ending in "…" when it cut.
func abbreviate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

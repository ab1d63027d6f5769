package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

type statusesOptions struct {
	output  *outputFlag
	cluster string
}

func newStatusesCommand(a *app) *cobra.Command {
	o := &statusesOptions{}
	cmd := &cobra.Command{
		Use:   "statuses KIND NAME",
		Short: "Show the adapters' latest reports about a resource",
		Long: `Shows each adapter's latest report about a resource: the generation it observed, its Available
condition and when it reported. -o wide adds every condition it reported; -o json and yaml show the reports as
the API returns them, data included.`,
		Example:           "  hyperfleet statuses cluster demo\n  hyperfleet statuses vs stable-4-16 -o yaml",
		Args:              usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: a.completeKindAndNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.statuses(cmd.Context(), o, args)
		},
	}
	o.output = a.addOutputFlag(cmd, formatTable, formatWide, formatJSON, formatYAML)
	addClusterFlag(a, cmd, &o.cluster)
	return cmd
}

func (a *app) statuses(ctx context.Context, o *statusesOptions, args []string) error {
	k, names, err := a.kindAndNames(args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usageErrorf("statuses shows one resource's reports: give its kind and name")
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	obj, err := c.resolve(ctx, k, o.cluster, names[0], true)
	if err != nil {
		return err
	}
	answer, err := c.do(c.gen.ListResourceStatuses(ctx, k, obj.ref()))
	if err != nil {
		return err
	}
	if f := o.output.value; f == formatJSON || f == formatYAML {
		return printDocument(a.stdout, f, answer)
	}
	var list api.AdapterStatusList
	if err := json.Unmarshal(answer, &list); err != nil {
		return fmt.Errorf("decode the reports: %w", err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(a.stderr, "No adapter has reported about %s/%s yet.\n", k.Singular, obj.name())
		return nil
	}
	return printStatuses(a, list.Items, obj.generation(), o.output.value == formatWide, time.Now())
}

// printStatuses prints ADAPTER, GENERATION (with the resource's own when the report is behind it), AVAILABLE,
// REASON and AGE (of the last report); wide adds the other conditions the adapter reported.
func printStatuses(a *app, items []api.AdapterStatus, generation int64, wide bool, now time.Time) error {
	tw := newTable(a.stdout)
	head := "ADAPTER\tGENERATION\tAVAILABLE\tREASON\tAGE"
	if wide {
		head += "\tCONDITIONS\tMESSAGE"
	}
	fmt.Fprintln(tw, head)
	for i := range items {
		st := &items[i]
		gen := fmt.Sprint(st.ObservedGeneration)
		if st.ObservedGeneration != generation {
			gen += fmt.Sprintf(" (of %d)", generation)
		}
		available, reason, message := string(conditions.Unknown), "", ""
		var others []api.Condition
		for _, c := range st.Conditions {
			if c.Type == conditions.Available {
				available, reason, message = string(c.Status), deref(c.Reason), deref(c.Message)
			} else {
				others = append(others, c)
			}
		}
		row := []string{st.Adapter, gen, available, orNone(reason), age(now, st.LastReportTime)}
		if wide {
			row = append(row, conditionsSummary(others), orNone(strings.ReplaceAll(message, "\t", " ")))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

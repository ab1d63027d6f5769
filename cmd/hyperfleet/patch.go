package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

type patchOptions struct {
	output                 *outputFlag
	spec, specFile, labels string
	ifMatch, cluster       string
}

const patchExample = `  hyperfleet patch nodepool workers --cluster demo --spec '{"replicas": 5}'
  hyperfleet patch cluster demo --labels team=core,env-
  hyperfleet patch cluster demo --spec '{"upgrade_schedule": "weekends"}' --if-match 3`

func newPatchCommand(a *app) *cobra.Command {
	o := &patchOptions{}
	cmd := &cobra.Command{
		Use:   "patch KIND NAME (--spec JSON | --spec-file FILE | --labels k=v,k-)",
		Short: "Change a resource's spec (JSON merge patch) and/or labels",
		Long: `Changes a resource with a JSON merge patch (RFC 7386) of its spec: objects merge and null removes a
member. --labels sets labels (k=v) and removes them (k-). --if-match applies the change only if nothing has written
the resource since it showed that resource_version (its ETag; -o yaml shows it), else 412 HYPERFLEET-CNF-004.`,
		Example:           patchExample,
		Args:              usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: a.completeKindAndNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOneOf(cmd, false, "spec", "spec-file"); err != nil {
				return err
			}
			if o.spec == "" && o.specFile == "" && o.labels == "" {
				return usageErrorf("nothing to change: give --spec, --spec-file or --labels")
			}
			return a.patch(cmd.Context(), o, args)
		},
	}
	o.output = a.addOutputFlag(cmd, "", formatName, formatJSON, formatYAML)
	fs := cmd.Flags()
	fs.StringVar(&o.spec, "spec", "", "merge patch of the spec, as JSON or YAML")
	fs.StringVar(&o.specFile, "spec-file", "", "file holding the merge patch of the spec (- for stdin)")
	fs.StringVar(&o.labels, "labels", "", "labels to set (k=v) or remove (k-), comma-separated")
	fs.StringVar(&o.ifMatch, "if-match", "", "only if the resource is still at this resource_version (ETag)")
	addClusterFlag(a, cmd, &o.cluster)
	return cmd
}

func (a *app) patch(ctx context.Context, o *patchOptions, args []string) error {
	k, names, err := a.kindAndNames(args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usageErrorf("patch changes one resource: give its kind and name")
	}
	body := map[string]any{}
	if o.spec != "" || o.specFile != "" {
		spec, err := readObject("--spec", o.spec, o.specFile, a.stdin)
		if err != nil {
			return err
		}
		body["spec"] = spec
	}
	if o.labels != "" {
		labels, err := parseLabels(o.labels, true)
		if err != nil {
			return err
		}
		body["labels"] = labels
	}
	var ifMatch *int64
	if o.ifMatch != "" {
		g, err := strconv.ParseInt(strings.Trim(o.ifMatch, `"`), 10, 64)
		if err != nil || g < 1 {
			return usageErrorf("--if-match %q: want a resource_version, e.g. 3", o.ifMatch)
		}
		ifMatch = &g
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	// A resource being deleted is found too, so that the API can say it can no longer change.
	current, err := c.resolve(ctx, k, o.cluster, names[0], true)
	if err != nil {
		return err
	}
	updated, err := c.patch(ctx, k, current.ref(), ifMatch, raw)
	if err != nil {
		return err
	}
	what := "patched"
	if deref(updated.UpdatedTime).Equal(deref(current.UpdatedTime)) {
		what = "patched (no change)"
	}
	return printResult(a.stdout, o.output.value, k, updated, what)
}

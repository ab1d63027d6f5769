package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// resolverAdapter is the adapter whose report on a VersionStream holds its rollout (pkg/rollout's Report). The CLI
// names it rather than importing the adapter, which would bring the adapter's dependencies into the CLI.
const resolverAdapter = "version-resolver"

const rolloutLong = `Staged rollouts of a VersionStream's releases (spec.rollout): a new release reaches the stream's clusters
stage by stage, each stage starting when the ones before run it healthy and have soaked.

status shows the version resolver's view of the rollout: the release, its state, each stage's progress and the
clusters that failed it. pause stops new upgrade starts on the stream (spec.rollout.paused; upgrades under way
finish); resume lets them start again, and also resumes a rollout that paused itself because a stage exceeded its
failure budget (it sets spec.rollout.resumed_at). Streams are platform objects: pause and resume need the platform
or admin role.`

const rolloutExample = `  hyperfleet rollout status stable-4-16
  hyperfleet rollout status stable-4-16 -o yaml
  hyperfleet rollout pause stable-4-16
  hyperfleet rollout resume stable-4-16`

func newRolloutCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "rollout (status|pause|resume) STREAM",
		Short:   "Follow, pause and resume a VersionStream's staged rollout",
		Long:    rolloutLong,
		Example: rolloutExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRolloutStatusCommand(a), newRolloutPauseCommand(a, true), newRolloutPauseCommand(a, false))
	return cmd
}

type rolloutStatusOptions struct {
	output *outputFlag
}

func newRolloutStatusCommand(a *app) *cobra.Command {
	o := &rolloutStatusOptions{}
	cmd := &cobra.Command{
		Use:   "status STREAM",
		Short: "Show a stream's rollout: its release, each stage's progress and the failed clusters",
		Long: `Shows the rollout of a VersionStream as its version resolver last reported it: the release being rolled
out and the rollout's state, one line per stage (clusters upgraded out of the stage's, those in progress, waiting
for their UpgradeSchedule's window, failed, blocked and pending, and until when a stage soaks), then the clusters
that failed the release. -o json and -o yaml print the report's rollout as the resolver wrote it.`,
		Example:           "  hyperfleet rollout status stable-4-16\n  hyperfleet rollout status stable-4-16 -o json",
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: a.completeStreams,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.rolloutStatus(cmd.Context(), o, args[0])
		},
	}
	o.output = a.addOutputFlag(cmd, formatTable, formatJSON, formatYAML)
	return cmd
}

func (a *app) rolloutStatus(ctx context.Context, o *rolloutStatusOptions, name string) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	k := a.kinds.VersionStream
	stream, err := c.resolve(ctx, k, "", name, true)
	if err != nil {
		return err
	}
	answer, err := c.do(c.gen.ListResourceStatuses(ctx, k, stream.ref()))
	if err != nil {
		return err
	}
	var list api.AdapterStatusList
	if err := json.Unmarshal(answer, &list); err != nil {
		return fmt.Errorf("decode the reports: %w", err)
	}
	var data map[string]any
	for i := range list.Items {
		if list.Items[i].Adapter == resolverAdapter {
			data = list.Items[i].Data
		}
	}
	what := k.Singular + "/" + stream.name()
	if data == nil {
		return &noRolloutError{what: what, why: "the " + resolverAdapter + " has not reported on it yet"}
	}
	report, err := rollout.ReportOf(data)
	if err != nil {
		return fmt.Errorf("the %s's report on %s: %w", resolverAdapter, what, err)
	}
	if report.Rollout == nil {
		why := "the " + resolverAdapter + " reports no rollout on it (a resolver from before staged rollouts)"
		if report.ResolvedVersion != "" {
			why += "; it resolves " + report.ResolvedVersion + " for every cluster at once"
		}
		return &noRolloutError{what: what, why: why}
	}
	if f := o.output.value; f == formatJSON || f == formatYAML {
		doc, err := json.Marshal(data[rollout.DataRollout])
		if err != nil {
			return fmt.Errorf("encode the rollout: %w", err)
		}
		return printDocument(a.stdout, f, doc)
	}
	policy, err := rollout.PolicyOf(specOf(stream))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return printRollout(a.stdout, what, report.Rollout, policy.Paused, time.Now())
}

// specOf returns o's spec as the API wrote it ({} when it has none).
func specOf(o *object) json.RawMessage {
	var doc struct {
		Spec json.RawMessage `json:"spec"`
	}
	if json.Unmarshal(o.raw, &doc) != nil || len(doc.Spec) == 0 || string(doc.Spec) == "null" {
		return json.RawMessage(`{}`)
	}
	return doc.Spec
}

// noRolloutError is a stream whose resolver has no rollout to show: a failure for a script that asked for one,
// with the reason a person needs.
type noRolloutError struct{ what, why string }

func (e *noRolloutError) Error() string {
	return fmt.Sprintf("no rollout to show for %s: %s", e.what, e.why)
}

type rolloutPauseOptions struct {
	output *outputFlag
	now    func() time.Time
}

// newRolloutPauseCommand builds pause (pause true) or resume.
func newRolloutPauseCommand(a *app, pause bool) *cobra.Command {
	o := &rolloutPauseOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "pause STREAM",
		Short: "Stop new upgrade starts on a stream (spec.rollout.paused: true)",
		Long: `Sets spec.rollout.paused on the stream: no cluster of the stream starts an upgrade until it is resumed;
upgrades under way finish. Other rollout settings are kept (a JSON merge patch).`,
		Example:           "  hyperfleet rollout pause stable-4-16",
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: a.completeStreams,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.rolloutPause(cmd.Context(), o, args[0], pause)
		},
	}
	if !pause {
		cmd.Use = "resume STREAM"
		cmd.Short = "Let a stream's rollout continue where it stopped, also after it paused itself"
		cmd.Long = `Clears spec.rollout.paused and sets spec.rollout.resumed_at to now: the rollout continues where it stopped.
A rollout that paused itself (a stage exceeded its failure budget) resumes too, and the failures before now no
longer count against the budget; the failed clusters are not tried again on the same release. Other rollout
settings are kept (a JSON merge patch).`
		cmd.Example = "  hyperfleet rollout resume stable-4-16"
	}
	o.output = a.addOutputFlag(cmd, "", formatName, formatJSON, formatYAML)
	return cmd
}

func (a *app) rolloutPause(ctx context.Context, o *rolloutPauseOptions, name string, pause bool) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	k := a.kinds.VersionStream
	stream, err := c.resolve(ctx, k, "", name, false)
	if err != nil {
		return err
	}
	// A merge patch (RFC 7386) of spec.rollout alone: the stages, deadline and the rest of the spec stay.
	policy := map[string]any{"paused": pause}
	verb := "pause"
	if !pause {
		policy["resumed_at"] = o.now().UTC().Format(time.RFC3339)
		verb = "resume"
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"rollout": policy}})
	if err != nil {
		return err
	}
	updated, err := c.patch(ctx, k, stream.ref(), nil, body)
	if err != nil {
		var aerr *apiError
		if errors.As(err, &aerr) && aerr.status == http.StatusForbidden {
			return fmt.Errorf("%s the rollout of %s/%s (a stream is a platform object: this needs the platform or admin role): %w",
				verb, k.Singular, stream.name(), err)
		}
		return fmt.Errorf("%s the rollout of %s/%s: %w", verb, k.Singular, stream.name(), err)
	}
	what := "rollout paused: no cluster of the stream starts an upgrade until `hyperfleet rollout resume " + stream.name() + "`"
	switch {
	case !pause:
		what = "rollout resumed"
	case deref(updated.UpdatedTime).Equal(deref(stream.UpdatedTime)):
		what = "rollout already paused (no change)"
	}
	return printResult(a.stdout, o.output.value, k, updated, what)
}

// completeStreams completes a stream's name, the one argument of the rollout commands.
func (a *app) completeStreams(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeNames(cmd.Context(), a.kinds.VersionStream, "", toComplete), cobra.ShellCompDirectiveNoFileComp
}

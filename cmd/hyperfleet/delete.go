package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

type deleteOptions struct {
	output            *outputFlag
	cluster           string
	wait, force, yes  bool
	timeout, interval time.Duration
}

func newDeleteCommand(a *app) *cobra.Command {
	o := &deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete KIND NAME...",
		Short: "Delete resources (the adapters clean up; --wait waits until they are gone)",
		Long: `Marks resources for deletion: each goes to phase Deleting (a cluster with its node pools) and is removed
once every required adapter has finalized it. --wait waits for that, with a progress line. --force removes a
resource and everything under it at once, skipping the adapters (admin only; what they manage may be left behind):
it asks for confirmation on a terminal, and needs --yes elsewhere.`,
		Example:           "  hyperfleet delete nodepool workers --cluster demo\n  hyperfleet delete cluster demo --wait --timeout 15m\n  hyperfleet delete cluster broken --force --yes",
		Args:              usageArgs(cobra.MinimumNArgs(2)),
		ValidArgsFunction: a.completeKindAndNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.delete(cmd.Context(), o, args)
		},
	}
	o.output = a.addOutputFlag(cmd, "", formatName)
	fs := cmd.Flags()
	fs.BoolVar(&o.wait, "wait", false, "wait until the resources are gone")
	fs.BoolVar(&o.force, "force", false, "remove at once, skipping the adapters' finalization (admin only; asks first)")
	fs.BoolVarP(&o.yes, "yes", "y", false, "with --force: do not ask for confirmation")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "with --wait: how long to wait (0: no limit)")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "with --wait: how often to poll")
	addClusterFlag(a, cmd, &o.cluster)
	return cmd
}

func (a *app) delete(ctx context.Context, o *deleteOptions, args []string) error {
	k, names, err := a.kindAndNames(args)
	if err != nil {
		return err
	}
	if o.interval <= 0 {
		return usageErrorf("--interval must be positive")
	}
	if o.force && !o.yes {
		if err := a.confirm(fmt.Sprintf("Force-delete %s %s and everything under them at once, skipping the adapters' clean-up?",
			k.Plural, strings.Join(names, ", "))); err != nil {
			return err
		}
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	var gone []*object
	for _, name := range names {
		obj, err := c.resolve(ctx, k, o.cluster, name, true)
		if err != nil {
			return err
		}
		if o.force {
			if _, err := c.do(c.gen.ForceDeleteResource(ctx, k, obj.ref())); err != nil {
				return err
			}
			if err := printResult(a.stdout, o.output.value, k, obj, "force-deleted"); err != nil {
				return err
			}
			continue
		}
		answer, err := c.do(c.gen.DeleteResource(ctx, k, obj.ref()))
		if err != nil {
			return err
		}
		// The answer is the resource marked for deletion, at its new generation; the one found will do too.
		if deleted, err := decodeObject(answer); err == nil {
			obj = deleted
		}
		if o.wait {
			gone = append(gone, obj)
			continue
		}
		if err := printResult(a.stdout, o.output.value, k, obj, "marked for deletion"); err != nil {
			return err
		}
	}
	for _, obj := range gone {
		if err := a.waitFor(ctx, c, k, obj, waitCondition{deleted: true}, o.timeout, o.interval); err != nil {
			return err
		}
	}
	return nil
}

// errNotConfirmed ends a command whose confirmation was refused.
var errNotConfirmed = errors.New("not confirmed; nothing was done")

// confirm asks question on the terminal and returns nil when the answer is yes. Without a terminal on stdin it is
// a usage error: a script must say --yes.
func (a *app) confirm(question string) error {
	if !isTerminal(a.stdin) {
		return usageErrorf("--force asks for confirmation, and stdin is not a terminal: add --yes")
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	answer, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// noLimit is how a quota flag, and the table, spell a quota that is not set.
const noLimit = "none"

func newTenantCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Show a tenant's quotas and usage, or set its quotas (admin)",
		Long: `A tenant's quotas limit its live clusters and the sum of its node pools' replicas (nodepool devices).
A create, or a node pool growing, that would go past one is refused with HYPERFLEET-QTA-001.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTenantGetCommand(a), newTenantSetCommand(a))
	return cmd
}

type tenantGetOptions struct{ output *outputFlag }

func newTenantGetCommand(a *app) *cobra.Command {
	o := &tenantGetOptions{}
	cmd := &cobra.Command{
		Use:   "get [TENANT]",
		Short: "Show a tenant's quotas and usage (without TENANT: your own)",
		Long: `Shows a tenant's quotas and what its live resources use of them. Without TENANT it shows the tenant your
token names; admins may name any tenant, others only their own.`,
		Example: "  hyperfleet tenant get\n  hyperfleet tenant get acme -o yaml",
		Args:    usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.tenantGet(cmd.Context(), o, args)
		},
	}
	o.output = a.addOutputFlag(cmd, formatTable, formatJSON, formatYAML)
	return cmd
}

func (a *app) tenantGet(ctx context.Context, o *tenantGetOptions, args []string) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	var answer []byte
	if len(args) == 0 {
		answer, err = c.do(c.gen.GetOwnTenant(ctx))
	} else {
		answer, err = c.do(c.gen.GetTenant(ctx, args[0]))
	}
	if err != nil {
		return err
	}
	return a.printTenant(o.output.value, answer)
}

// printTenant prints a tenant as the API answered it: as a table, or the document as JSON or YAML.
func (a *app) printTenant(format string, answer []byte) error {
	if format == formatJSON || format == formatYAML {
		return printDocument(a.stdout, format, answer)
	}
	var t api.Tenant
	if err := json.Unmarshal(answer, &t); err != nil {
		return fmt.Errorf("decode the tenant: %w", err)
	}
	return printTenantTable(a.stdout, &t, time.Now())
}

// printTenantTable prints TENANT, CLUSTERS and NODEPOOL DEVICES as use/limit, and when an admin last set the quotas.
func printTenantTable(w io.Writer, t *api.Tenant, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "TENANT\tCLUSTERS\tNODEPOOL DEVICES\tQUOTAS SET")
	set := "never"
	if t.UpdatedTime != nil {
		set = age(now, *t.UpdatedTime) + " ago by " + deref(t.UpdatedBy)
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Id, useOf(t.Usage.Clusters, t.Quotas.Clusters),
		useOf(t.Usage.NodepoolDevices, t.Quotas.NodepoolDevices), set)
	return tw.Flush()
}

// useOf is "use/limit", or "use/none" without a limit.
func useOf(use int64, limit *int64) string {
	if limit == nil {
		return fmt.Sprintf("%d/%s", use, noLimit)
	}
	return fmt.Sprintf("%d/%d", use, *limit)
}

type tenantSetOptions struct {
	output                       *outputFlag
	maxClusters, maxPoolsDevices string
}

func newTenantSetCommand(a *app) *cobra.Command {
	o := &tenantSetOptions{}
	cmd := &cobra.Command{
		Use:   "set TENANT (--max-clusters N|none) (--max-nodepool-devices N|none)",
		Short: "Set a tenant's quotas (admin)",
		Long: `Sets a tenant's quotas; a quota whose flag is not given keeps its value, and "none" removes the limit.
A quota below what the tenant uses takes nothing away: it refuses new use until the use is under it.`,
		Example: "  hyperfleet tenant set acme --max-clusters 10 --max-nodepool-devices 30\n  hyperfleet tenant set acme --max-clusters none",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("max-clusters") && !cmd.Flags().Changed("max-nodepool-devices") {
				return usageErrorf("give --max-clusters, --max-nodepool-devices or both")
			}
			return a.tenantSet(cmd.Context(), cmd, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.maxClusters, "max-clusters", "", "live clusters at most, or none")
	cmd.Flags().StringVar(&o.maxPoolsDevices, "max-nodepool-devices", "", "sum of the live node pools' replicas at most, or none")
	o.output = a.addOutputFlag(cmd, formatTable, formatJSON, formatYAML)
	return cmd
}

// quotaFlag reads a quota flag, whose value v is a whole number from 0 or none (nil), and reports whether it was
// given at all.
func quotaFlag(cmd *cobra.Command, flag, v string) (bool, *int64, error) {
	if !cmd.Flags().Changed(flag) {
		return false, nil, nil
	}
	if v == noLimit {
		return true, nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return false, nil, usageErrorf("--%s %q: want a whole number from 0, or %s", flag, v, noLimit)
	}
	return true, &n, nil
}

// tenantSet reads the tenant's quotas, changes those the flags give and puts them back: the API's PUT replaces
// both, and a flag left out keeps its quota.
func (a *app) tenantSet(ctx context.Context, cmd *cobra.Command, o *tenantSetOptions, tenant string) error {
	// Flags are read before anything is sent, so that a mistyped one changes nothing.
	setClusters, clusters, err := quotaFlag(cmd, "max-clusters", o.maxClusters)
	if err != nil {
		return err
	}
	setDevices, devices, err := quotaFlag(cmd, "max-nodepool-devices", o.maxPoolsDevices)
	if err != nil {
		return err
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	answer, err := c.do(c.gen.GetTenant(ctx, tenant))
	if err != nil {
		return err
	}
	var t api.Tenant
	if err := json.Unmarshal(answer, &t); err != nil {
		return fmt.Errorf("decode the tenant: %w", err)
	}
	q := t.Quotas
	if setClusters {
		q.Clusters = clusters
	}
	if setDevices {
		q.NodepoolDevices = devices
	}
	answer, err = c.do(c.gen.PutTenant(ctx, tenant, api.TenantPut{Quotas: q}))
	if err != nil {
		return err
	}
	return a.printTenant(o.output.value, answer)
}

package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func newVersionCommand(a *app) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the CLI's version and the API's",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.stdout, "Client: hyperfleet %s (build %s)\n", command.Version(), command.Build())
			if clientOnly {
				return nil
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			body, err := c.do(c.gen.GetAPIInfo(cmd.Context()))
			if err != nil {
				return err
			}
			var info api.APIInfo
			if err := json.Unmarshal(body, &info); err != nil {
				return fmt.Errorf("decode the API's version: %w", err)
			}
			fmt.Fprintf(a.stdout, "Server: hyperfleet-api %s (build %s) at %s\n", info.Version, info.Build, c.server)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "the CLI's version only")
	return cmd
}

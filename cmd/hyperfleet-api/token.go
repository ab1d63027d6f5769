package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
)

// Development tokens are issued with these unless told otherwise; `serve` must be started with the same.
const (
	devTokenIssuer   = "hyperfleet-dev" //nolint:gosec // an issuer name, not a credential
	devTokenAudience = "hyperfleet"
)

func defaultDevIssuerDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "hyperfleet", "dev-issuer")
}

func newTokenCommand() *cobra.Command {
	var (
		subject, adapter, dir, issuer, audience string
		tenant, tenantClaim                     string
		roles                                   []string
		ttl                                     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Mint a signed development token (never in production)",
		Long: `Creates a local signing key and its JWKS file once (in --dir), then prints a token for --subject with
--roles. Start serve with --enable-jwt --jwk-cert-file <dir>/dev-jwks.json --jwt-issuer and --jwt-audience as
printed on stderr to accept such tokens.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Getenv("HYPERFLEET_ENV") == server.EnvProduction {
				return fmt.Errorf("token mints development tokens and refuses to run with HYPERFLEET_ENV=production")
			}
			parsed := make([]auth.Role, 0, len(roles))
			for _, r := range roles {
				role, err := auth.ParseRole(strings.TrimSpace(r))
				if err != nil {
					return fmt.Errorf("--roles: %w", err)
				}
				parsed = append(parsed, role)
			}
			dev, err := auth.LoadOrCreateDevIssuer(dir)
			if err != nil {
				return err
			}
			var extra map[string]any
			if tenant != "" {
				extra = map[string]any{tenantClaim: tenant}
			}
			token, err := dev.Mint(subject, parsed, adapter, ttl, issuer, audience, extra)
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "serve accepts it with: --enable-jwt --enable-authz --jwk-cert-file %s --jwt-issuer %s --jwt-audience %s\n",
				dev.JWKSPath(), issuer, audience)
			_, err = fmt.Fprintln(cmd.OutOrStdout(), token)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&subject, "subject", "developer", "the identity (sub claim)")
	fs.StringSliceVar(&roles, "roles", []string{"user"}, "roles: viewer, user, platform, adapter, admin")
	fs.StringVar(&adapter, "adapter", "", "with role adapter: the adapter name it may report as")
	fs.DurationVar(&ttl, "ttl", 12*time.Hour, "lifetime")
	fs.StringVar(&dir, "dir", defaultDevIssuerDir(), "where the development signing key and JWKS live")
	fs.StringVar(&issuer, "issuer", devTokenIssuer, "iss claim")
	fs.StringVar(&audience, "audience", devTokenAudience, "aud claim")
	fs.StringVar(&tenant, "tenant", "", "the caller's tenant, put in the --tenant-claim claim (make run's API reads org_id)")
	fs.StringVar(&tenantClaim, "tenant-claim", "org_id", "the claim that carries --tenant")
	return cmd
}

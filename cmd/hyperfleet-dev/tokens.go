package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Development tokens carry the issuer and audience `hyperfleet-api token` uses by default, so that tokens minted
// either way are accepted by the API `up` runs.
const (
	devIssuer   = "hyperfleet-dev" //nolint:gosec // an issuer name, not a credential
	devAudience = "hyperfleet"
	// adapterTokenTTL is long enough to survive a refresh missed now and then; refreshEvery renews them well before.
	adapterTokenTTL = 24 * time.Hour
	refreshEvery    = time.Hour
	userTokenTTL    = 12 * time.Hour
	userSubject     = "developer"
	// devTenantClaim is the claim the development API reads tenants from; the developer's tokens name the default
	// tenant, which holds everything made before tenancy was on, and `hyperfleet-api token --tenant` mints others.
	devTenantClaim = "org_id"
)

// userRoles are the developer's: user for clusters and node pools, and platform for the demo's VersionStream,
// UpgradeSchedule and ManagementClusters, which a development run's developer operates as well.
func userRoles() []auth.Role { return []auth.Role{auth.RoleUser, auth.RolePlatform} }

// devTokens mints the tokens of a development run: one per adapter in a file it re-reads, and one for the user.
type devTokens struct {
	issuer *auth.DevIssuer
	devDir string
}

func newDevTokens(issuerDir, devDir string) (*devTokens, error) {
	issuer, err := auth.LoadOrCreateDevIssuer(issuerDir)
	if err != nil {
		return nil, err
	}
	return &devTokens{issuer: issuer, devDir: devDir}, nil
}

// tokenAdapters are the adapters that get a token of their own (role adapter, their name as the adapter claim),
// allowed to report only under their own name and only on the kinds that require them: the placer on clusters, the
// applier on clusters and management clusters (--required-adapters).
func tokenAdapters() []string {
	return []string{compResolver, compApplier, compProvisioner, compPlacer}
}

func (t *devTokens) adapterFile(name string) string { return filepath.Join(t.devDir, name+".token") }

// serveFlags are the flags with which hyperfleet-api accepts the tokens.
func (t *devTokens) serveFlags() []string {
	return []string{"--enable-jwt", "--enable-authz", "--jwk-cert-file", t.issuer.JWKSPath(),
		"--jwt-issuer", devIssuer, "--jwt-audience", devAudience, "--tenant-claim", devTenantClaim}
}

// mintAll writes a fresh token for every adapter and for the user (user.token in the dev dir).
func (t *devTokens) mintAll() error {
	for _, name := range tokenAdapters() {
		if err := t.mintAdapter(name); err != nil {
			return err
		}
	}
	token, err := t.mint(userSubject, userTokenTTL, userRoles()...)
	if err != nil {
		return err
	}
	return writeSecret(filepath.Join(t.devDir, fileUserToken), token)
}

// mintAdapter writes a fresh token for the adapter; the adapter re-reads its file when it changes.
func (t *devTokens) mintAdapter(name string) error {
	token, err := t.issuer.Mint(name, []auth.Role{auth.RoleAdapter}, name, adapterTokenTTL, devIssuer, devAudience)
	if err != nil {
		return err
	}
	return writeSecret(t.adapterFile(name), token)
}

func (t *devTokens) mint(subject string, ttl time.Duration, roles ...auth.Role) (string, error) {
	return t.issuer.Mint(subject, roles, "", ttl, devIssuer, devAudience, map[string]any{devTenantClaim: resource.DefaultTenant})
}

// userToken returns the token mintAll wrote for the user.
func (t *devTokens) userToken() (string, error) {
	b, err := os.ReadFile(filepath.Join(t.devDir, fileUserToken))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// writeSecret replaces path with content, readable by the owner only, in one rename: an adapter re-reading its
// token file never sees half a token.
func writeSecret(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

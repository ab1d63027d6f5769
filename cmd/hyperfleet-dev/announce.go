package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/cmd/hyperfleet-dev/internal/supervisor"
	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// console is what announce and refreshTokens write to.
type console interface {
	Printf(format string, args ...any)
	Warnf(format string, args ...any)
	Println(text string)
	AllReady() <-chan struct{}
}

var _ console = (*supervisor.Supervisor)(nil)

// announce waits until every component is ready and prints where everything listens and how to log in.
func (s *stack) announce(ctx context.Context, con console, started time.Time) {
	select {
	case <-con.AllReady():
	case <-ctx.Done():
		return
	}
	con.Printf("all components ready in %s", time.Since(started).Round(100*time.Millisecond))
	con.Println(s.banner())
}

// banner says where everything listens, with commands that work from the directory `up` was started in.
func (s *stack) banner() string {
	cli, apiTool, devTool := s.relBin("hyperfleet"), s.relBin("hyperfleet-api"), s.relBin("hyperfleet-dev")
	api := "http://" + s.cfg.apiAddr
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("")
	p("HyperFleet is up.")
	p("  API            %s/api/hyperfleet/v1   (Swagger UI: %s/openapi-ui/)", api, api)
	p("  API health     http://%s/readyz   metrics http://%s/metrics", s.cfg.healthAddr, s.cfg.metricsAddr)
	p("  PostgreSQL     %s", redactURL(s.dsn))
	for _, mc := range s.managementClusters() {
		p("  %-14s https://%s   (KUBECONFIG=%s, namespace %s; hypershift-sim http://%s/readyz)",
			mc.name, mc.kubeAddr, s.kubeconfig(mc.name), s.cfg.namespace, mc.hypershiftAddr)
	}
	publish := devTool + " publish " + demoStreamVersion
	if s.cfg.cincinnatiAddr != defaultUpConfig().cincinnatiAddr {
		publish += " --cincinnati-url http://" + s.cfg.cincinnatiAddr
	}
	p("  Cincinnati     http://%s   (a new release: %s)", s.cfg.cincinnatiAddr, publish)
	p("  Hivelocity     http://%s/api/v2   (devices: curl -s http://%s/_sim/devices)", s.cfg.hivelocityAddr, s.cfg.hivelocityAddr)
	p("  adapters       %s http://%s, %s http://%s, %s http://%s, %s http://%s (/healthz /readyz /metrics)",
		compResolver, s.cfg.resolverOps, compApplier, s.cfg.applierOps, compProvisioner, s.cfg.provisionerOps,
		compPlacer, s.cfg.placerOps)
	p("  logs           %s/<component>.log; state of every component in %s", s.dev("logs"), s.dev("up.json"))
	p("  demo           VersionStream %s, UpgradeSchedule %s, a dozen spare devices (hvWorker, hvControlPlane in LAX2, NYC1)", demoStream, demoSchedule)
	p("                 ManagementClusters %s   (%s get managementclusters)", s.formatCapacity(), cli)
	p("")
	s.access(p, cli, apiTool, api)
	p("")
	p("A staged rollout: %s rolls a new release to the stage=canary cluster first, then (after a %s soak) to", demoStream, demoCanarySoak)
	p("half of the stage=early clusters at a time, then the rest. Make a canary and another cluster, publish, and watch:")
	for _, c := range []struct{ name, stage string }{{"canary-1", "canary"}, {"early-1", "early"}} {
		p("  %s create cluster %s --labels %s=%s --spec '{\"version_stream\": %q, \"upgrade_schedule\": %q, \"hosted_cluster\": {\"dns\": {\"base_domain\": \"example.com\"}}}'",
			cli, c.name, demoStageLabel, c.stage, demoStream, demoSchedule)
	}
	p("  %s   (once both are Ready)", publish)
	p("  %s rollout status %s   (stages, progress, failures)", cli, demoStream)
	p("  %s get clusters   (VERSION, and HELD: why a cluster waits)", cli)
	p("  %s rollout pause %s   /   %s rollout resume %s", cli, demoStream, cli, demoStream)
	return b.String()
}

// access says how the CLI gets in: no token when authentication is off, else the user token and how to log in
// with it.
func (s *stack) access(p func(format string, args ...any), cli, apiTool, api string) {
	if s.tokens == nil {
		p("Authentication is OFF: every caller is an admin. Use the CLI without logging in:")
		p("  %s --server %s get versionstreams", cli, api)
		return
	}
	token, err := s.tokens.userToken()
	if err != nil {
		p("No user token (%v); mint one with %s token --subject %s --roles user,platform --tenant %s", err, apiTool, userSubject, resource.DefaultTenant)
		return
	}
	p("User token (subject %s, roles user and platform, tenant %s, valid %s; also in %s):", userSubject, resource.DefaultTenant, userTokenTTL, s.dev(fileUserToken))
	p("  %s", token)
	p("Log the CLI in:")
	p("  %s login --server %s --token-file %s", cli, api, s.dev(fileUserToken))
	p("or mint another, in a tenant of its own: %s token --subject alice --roles user --tenant acme 2>/dev/null | %s login --server %s", apiTool, cli, api)
}

// relBin names a binary as a developer in the working directory would type it: bin/hyperfleet rather than an
// absolute path, when the binaries are below it.
func (s *stack) relBin(name string) string {
	path := filepath.Join(s.cfg.binDir, name)
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return path
	}
	return rel
}

// redactURL hides a password in a database URL.
func redactURL(raw string) string {
	i := strings.Index(raw, "://")
	at := strings.LastIndex(raw, "@")
	if i < 0 || at < i {
		return raw
	}
	userinfo := raw[i+3 : at]
	if user, _, ok := strings.Cut(userinfo, ":"); ok {
		return raw[:i+3] + user + ":xxxxx" + raw[at:]
	}
	return raw
}

// refreshTokens mints fresh adapter tokens every refreshEvery, so that a run longer than a token's lifetime keeps
// working; the adapters re-read their token files.
func (s *stack) refreshTokens(ctx context.Context, con console) {
	if s.tokens == nil {
		return
	}
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, name := range tokenAdapters() {
			if err := s.tokens.mintAdapter(name); err != nil {
				con.Warnf("cannot renew the token of %s: %v", name, err)
			}
		}
	}
}

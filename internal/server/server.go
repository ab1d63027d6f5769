package server

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	pgdriver "gorm.io/driver/postgres"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/embeddeddb"
	"github.com/hyperfleet/hyperfleet/internal/eventrelay"
	"github.com/hyperfleet/hyperfleet/internal/feed"
	"github.com/hyperfleet/hyperfleet/internal/httpapi"
	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/internal/schema"
)

// Server is a running hyperfleet-api: its database and its three listeners.
type Server struct {
	cfg      Config
	log      *slog.Logger
	db       *gorm.DB
	sqlDB    *sql.DB
	embedded *embeddeddb.Server
	servers  []*http.Server
	lns      []net.Listener
	tracing  *tracing
	draining atomic.Bool
	// required is the database's required adapters this replica serves.
	required postgres.RequiredAdapters
	// dsn is the database's URL, for the change feed's own sessions.
	dsn string
	// The change feed: its own small pool of sessions, the sequencer (one process at a time works), this
	// process's listener and fan-out.
	feedPool  *pgxpool.Pool
	sequencer *postgres.Sequencer
	notifier  *postgres.Notifier
	feed      *feed.Feed
	relay     *eventrelay.Relay // nil without --events-nats-url
	// historyPruner is nil when the history is kept forever.
	historyPruner *postgres.HistoryPruner
}

// New opens the database (starting and migrating the embedded one if configured), checks that its schema is
// this binary's, builds the API and binds the listeners. It returns ErrSchemaOutdated (wrapped) when the
// database needs `hyperfleet-api migrate`. Call Run to serve; Run releases everything New acquired.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Server, err error) {
	if err := cfg.ValidateServe(); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes < 1024 {
		return nil, fmt.Errorf("--max-body-bytes %d is too small (at least 1024)", cfg.MaxBodyBytes)
	}
	s := &Server{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := s.openDatabase(ctx, true); err != nil {
		return nil, err
	}
	if err := postgres.CheckSchema(ctx, s.db); err != nil {
		return nil, err
	}
	doc, err := schema.Load(s.cfg.document())
	if err != nil {
		return nil, fmt.Errorf("load openapi document: %w", err)
	}
	set, err := s.checkRequiredAdapters(ctx, doc)
	if err != nil {
		return nil, err
	}
	publicYAML, publicJSON, err := doc.Public()
	if err != nil {
		return nil, fmt.Errorf("public openapi document: %w", err)
	}
	store := postgres.NewStore(s.db, set.All)
	if cfg.JWT.TenantClaim != "" {
		if err := postgres.CheckTenancy(ctx, s.db); err != nil {
			return nil, err
		}
		store.EnableTenancy()
		log.Info("tenancy on: callers are confined to the tenant their token's claim names", "claim", cfg.JWT.TenantClaim)
	}
	svc := resource.NewService(store, set.All)
	svc.SuppressUnchangedReports(cfg.StatusHeartbeat)
	if s.feedPool, err = postgres.OpenFeedPool(ctx, s.dsn); err != nil {
		return nil, err
	}
	s.notifier = postgres.NewNotifier(s.feedPool, log)
	s.feed = feed.New(store, s.notifier.C(), feed.Config{Recent: 4096, Grace: cfg.EventsGrace})
	if err := s.feed.Start(ctx); err != nil {
		return nil, err
	}
	// A change of required adapters since the last start must not leave aggregates computed for the old set. A
	// deleting resource that every adapter of the new set has finalized goes: each is logged, as it is data lost.
	for _, d := range set.All {
		start := time.Now()
		n, err := svc.Reaggregate(resource.WithCaller(ctx, resource.SystemCaller()), d, 500, resource.ReaggregateHooks{
			Progress: func(done int) {
				if done%10000 == 0 {
					log.Info("re-aggregating for the configured required adapters", "kind", d.Kind, "done", done)
				}
			},
			Removed: func(r *resource.Resource) {
				log.Warn("removed a deleting resource on re-aggregating for the database's required adapters: none of them still had to finalize it",
					"kind", r.Kind, "id", r.ID, "name", r.Name, "parent_id", r.ParentID, "required_adapters", d.RequiredAdapters,
					"deleted_time", r.DeletedTime, "deleted_by", r.DeletedBy)
			},
		})
		if err != nil {
			return nil, fmt.Errorf("re-aggregate %s: %w", d.Kind, err)
		}
		if n > 0 {
			log.Info("re-aggregated for the configured required adapters", "kind", d.Kind, "resources", n,
				"required_adapters", d.RequiredAdapters, "took", time.Since(start).String())
		}
	}
	pending, err := postgres.NewPendingCollector(store, set.All, postgres.PendingConfig{Every: cfg.PhaseCountEvery})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewDBStatsCollector(s.sqlDB, "hyperfleet"), postgres.NewPhaseCollector(store, set.All, cfg.PhaseCountEvery), pending)
	domainMetrics, err := httpapi.NewDomainMetrics(reg)
	if err != nil {
		return nil, err
	}
	s.sequencer, err = postgres.NewSequencer(postgres.SequencerConfig{Pool: s.feedPool, Retention: cmp.Or(cfg.EventsRetention, DefaultEventsRetention),
		MaxEvents: cmp.Or(cfg.EventsMax, 1_000_000), CompactEvery: cfg.EventsCompactEvery, LeaseTTL: cfg.EventsLeaseTTL,
		Log: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	if s.historyPruner, err = newHistoryPruner(cfg, s.feedPool, log, reg); err != nil {
		return nil, err
	}
	// This process's writes wake its sequencer at once; other processes' wait for its poll.
	store.OnWrite(s.sequencer.Poke)
	if cfg.EventsNATSURL != "" {
		s.relay, err = eventrelay.New(eventrelay.Config{URL: cfg.EventsNATSURL, Stream: cfg.EventsNATSStream,
			SubjectPrefix: cfg.EventsNATSSubjectPrefix, Auth: cfg.EventsNATSAuth, Log: log, Registerer: reg},
			s.feed, store, postgres.NewNATSRelayLeader(s.feedPool))
		if err != nil {
			return nil, err
		}
	}
	svc.Observe(domainMetrics)
	httpCfg := httpapi.Config{
		Version: cfg.Version, Build: cfg.Build, BuildTime: cfg.BuildTime, MaxBodyBytes: cfg.MaxBodyBytes, OpenAPIYAML: publicYAML, OpenAPIJSON: publicJSON,
		Authorize: cfg.EnableAuthz, RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst,
		AdapterRateLimit: cfg.AdapterRateLimit, AdapterRateBurst: cfg.AdapterRateBurst,
		Feed: s.feed, WatchHeartbeat: cfg.WatchHeartbeat,
		WatchesPerIdentity: cfg.WatchesPerIdentity, WatchesTotal: cfg.WatchesTotal, WatchMaxLifetime: cfg.WatchMaxLifetime,
		ListsPerIdentity: cfg.ListsPerIdentity, Tenancy: cfg.JWT.TenantClaim != "",
		Tenants:     resource.NewTenants(store, set.All),
		ShardLeases: resource.NewShardLeases(store),
	}
	if httpCfg.Authenticate, err = authenticator(ctx, cfg, log); err != nil {
		return nil, err
	}
	if httpCfg.TenantRateLimits, err = tenantRateLimits(cfg, log); err != nil {
		return nil, err
	}
	edge, err := httpapi.NewHandler(httpCfg, svc, set.All, log, reg)
	if err != nil {
		return nil, err
	}
	var apiHandler http.Handler = edge
	if cfg.EnableTracing {
		if s.tracing, err = startTracing(ctx, cfg); err != nil {
			return nil, err
		}
		apiHandler = s.tracing.wrap(apiHandler)
	}

	health := http.NewServeMux()
	health.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	health.HandleFunc("GET /readyz", s.ready)
	health.HandleFunc("GET /healthcheck", s.ready)
	metrics := http.NewServeMux()
	metrics.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if cfg.EnablePprof {
		metrics.HandleFunc("GET /debug/pprof/", pprof.Index)
		metrics.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		metrics.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}

	var cert *reloading[*tls.Certificate]
	if cfg.EnableHTTPS || cfg.EnableHealthHTTPS || cfg.EnableMetricsHTTPS {
		if cert, err = loadCertificate(cfg.HTTPSCertFile, cfg.HTTPSKeyFile, log); err != nil {
			return nil, err
		}
	}
	for _, l := range []struct {
		name, addr string
		h          http.Handler
		https      bool
	}{{"api", cfg.APIBindAddress, apiHandler, cfg.EnableHTTPS}, {"health", cfg.HealthBindAddress, health, cfg.EnableHealthHTTPS},
		{"metrics", cfg.MetricsBindAddress, metrics, cfg.EnableMetricsHTTPS}} {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", l.addr)
		if err != nil {
			return nil, fmt.Errorf("%s listener on %s: %w", l.name, l.addr, err)
		}
		if l.https {
			ln = tls.NewListener(ln, tlsConfig(cert))
		}
		s.lns = append(s.lns, ln)
		srv := &http.Server{
			Handler: l.h, ReadTimeout: cfg.HTTPReadTimeout, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: cfg.HTTPWriteTimeout,
			IdleTimeout: cfg.HTTPIdleTimeout, MaxHeaderBytes: 64 << 10,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		if l.name == "api" {
			// Shutdown waits for open requests, and a watch stream never ends by itself: end them, cleanly.
			srv.RegisterOnShutdown(edge.StopStreams)
		}
		s.servers = append(s.servers, srv)
	}
	return s, nil
}

// authenticator builds the request authenticator from the configuration: nil (with a loud warning) when JWT is
// off; else a JWT verifier whose identities an ACL file, if given, assigns roles. A JWKS file and the ACL file are
// reloaded when they change (reloading); a JWKS URL refreshes itself.
func authenticator(ctx context.Context, cfg Config, log *slog.Logger) (func(*http.Request) (auth.Identity, error), error) {
	if !cfg.EnableJWT {
		if cfg.InsecureNoAuth {
			log.Warn("INSECURE: --insecure-no-auth: authentication is OFF and every caller is an admin; the listeners are on loopback only",
				"env", cfg.Env, "api", cfg.APIBindAddress)
			return nil, nil
		}
		log.Warn("authentication is OFF: every caller is an admin (development only; enable with --enable-jwt)")
		return nil, nil
	}
	jwtCfg := cfg.JWT
	jwtCfg.Logger = log
	newVerifier := func() (*auth.Verifier, error) {
		v, err := auth.NewVerifier(ctx, jwtCfg)
		if err != nil {
			return nil, fmt.Errorf("JWT verifier: %w", err)
		}
		return v, nil
	}
	var verifier func() *auth.Verifier
	if jwtCfg.JWKSFile != "" {
		// A verifier of a file starts nothing in the background, so building a new one per change leaks nothing.
		keys, err := newReloading("--jwk-cert-file", newVerifier, log, jwtCfg.JWKSFile)
		if err != nil {
			return nil, err
		}
		verifier = keys.get
	} else {
		v, err := newVerifier()
		if err != nil {
			return nil, err
		}
		verifier = func() *auth.Verifier { return v }
	}
	acl := func() *auth.ACL { return nil }
	if cfg.ACLFile != "" {
		loadACL := func() (*auth.ACL, error) {
			a, err := auth.LoadACL(cfg.ACLFile)
			if err != nil {
				return nil, fmt.Errorf("--acl-file: %w", err)
			}
			return a, nil
		}
		file, err := newReloading("--acl-file", loadACL, log, cfg.ACLFile)
		if err != nil {
			return nil, err
		}
		acl = file.get
	}
	if !cfg.EnableAuthz {
		log.Warn("authorization is OFF: every authenticated caller is an admin (enable with --enable-authz)")
	}
	return func(r *http.Request) (auth.Identity, error) {
		token, err := auth.BearerToken(r.Header.Get("Authorization"))
		if err != nil {
			return auth.Identity{}, err
		}
		id, err := verifier().Verify(r.Context(), token)
		if err != nil {
			return id, err
		}
		if a := acl(); a != nil {
			return a.Apply(id), nil
		}
		return id, nil
	}, nil
}

// tenantRateLimits returns the getter of the rate-limits file's budgets, reloaded when the file changes; nil
// without a file.
func tenantRateLimits(cfg Config, log *slog.Logger) (func() *httpapi.TenantRateLimits, error) {
	if cfg.RateLimitsFile == "" {
		return nil, nil
	}
	if cfg.JWT.TenantClaim == "" {
		log.Warn("--rate-limits-file limits tenants, and tenancy is off (no --tenant-claim): only the per-identity limits apply")
	}
	load := func() (*httpapi.TenantRateLimits, error) {
		l, err := httpapi.LoadTenantRateLimits(cfg.RateLimitsFile)
		if err != nil {
			return nil, fmt.Errorf("--rate-limits-file: %w", err)
		}
		return l, nil
	}
	file, err := newReloading("--rate-limits-file", load, log, cfg.RateLimitsFile)
	if err != nil {
		return nil, err
	}
	return file.get, nil
}

// APIAddr is the API listener's bound address (useful with port 0).
func (s *Server) APIAddr() string { return s.lns[0].Addr().String() }

// HealthAddr is the health listener's bound address.
func (s *Server) HealthAddr() string { return s.lns[1].Addr().String() }

// MetricsAddr is the metrics listener's bound address.
func (s *Server) MetricsAddr() string { return s.lns[2].Addr().String() }

// Run serves until ctx ends, then reports not-ready, drains in-flight requests within ShutdownTimeout and
// releases the database. It returns the first listener failure, or nil after a clean drain.
func (s *Server) Run(ctx context.Context) error {
	defer s.close()
	g, gctx := errgroup.WithContext(ctx)
	for i, srv := range s.servers {
		ln := s.lns[i]
		g.Go(func() error {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve %s: %w", ln.Addr(), err)
			}
			return nil
		})
	}
	s.log.Info("serving", "api", s.APIAddr(), "health", s.HealthAddr(), "metrics", s.MetricsAddr())
	g.Go(func() error { return s.watchRequiredAdapters(gctx) })
	g.Go(func() error { return s.sequencer.Run(gctx) })
	g.Go(func() error { return s.notifier.Run(gctx) })
	g.Go(func() error { return s.feed.Run(gctx) })
	if s.relay != nil {
		g.Go(func() error { return s.relay.Run(gctx) })
	}
	if s.historyPruner != nil {
		g.Go(func() error { return s.historyPruner.Run(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		s.draining.Store(true)
		s.log.Info("draining", "timeout", s.cfg.ShutdownTimeout.String())
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
		defer cancel()
		for _, srv := range s.servers {
			if err := srv.Shutdown(shutdownCtx); err != nil {
				// Past the deadline whatever is still open is cut: a stuck client must not keep the process alive.
				s.log.Warn("drain deadline passed; closing remaining connections", "error", err)
				_ = srv.Close()
			}
		}
		return nil
	})
	err := g.Wait()
	s.log.Info("stopped")
	return err
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.sqlDB.PingContext(ctx); err != nil {
		http.Error(w, "database unreachable", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// ErrRequiredAdapters is returned (wrapped) when the required adapters a replica was started with are not the
// database's, or when the database's changed while it served.
var ErrRequiredAdapters = errors.New("required adapters differ from the database's")

// ErrRequiredAdaptersUnset is returned (wrapped) when serve finds a database whose required adapters were never
// set: only `hyperfleet-api migrate --required-adapters` (the migrate Job) sets them.
var ErrRequiredAdaptersUnset = errors.New("the database's required adapters were never set")

// requiredOf returns the required adapters of set's kinds as the database records them, and the kinds' names.
func requiredOf(set *kinds.Set) (postgres.RequiredAdapters, []string) {
	want, names := postgres.RequiredAdapters{}, make([]string, len(set.All))
	for i, d := range set.All {
		names[i] = d.Kind
		want[d.Kind] = d.RequiredAdapters
	}
	return want, names
}

// checkRequiredAdapters returns the kinds with the database's required adapters, which serve reads and never
// writes: migrate sets them, once per change, so that changing them restarts no replica but through that one
// write. A replica given --required-adapters checks them against the database's and does not start when they
// differ, since two replicas aggregating for different sets would flip every resource's status between them.
// The embedded database is the exception: serve migrates it itself, so it also sets them there, as migrate would.
func (s *Server) checkRequiredAdapters(ctx context.Context, doc *schema.Document) (*kinds.Set, error) {
	given, err := kinds.Build(doc, s.cfg.kinds(), s.cfg.RequiredAdapters)
	if err != nil {
		return nil, err
	}
	want, _ := requiredOf(given)
	if s.embedded != nil && s.cfg.RequiredAdapters != nil {
		if err := s.setRequiredAdapters(ctx); err != nil {
			return nil, err
		}
	}
	stored, err := postgres.LoadRequiredAdapters(ctx, s.db)
	if err != nil {
		return nil, err
	}
	if stored == nil {
		hint := "kind=adapter,…;…"
		if s.cfg.RequiredAdapters != nil {
			hint = strings.TrimSuffix(describeRequired(want), "(none)")
		}
		return nil, fmt.Errorf("%w: run `hyperfleet-api migrate --required-adapters '%s'` on it first (deploy/'s hyperfleet-migrate Job does; "+
			"`--required-adapters ''` requires none); serve only reads them", ErrRequiredAdaptersUnset, hint)
	}
	if s.cfg.RequiredAdapters != nil && !want.Equal(stored) {
		return nil, fmt.Errorf("%w: this replica was started with --required-adapters %s, the database requires %s; "+
			"change the database's with `hyperfleet-api migrate --required-adapters '...'`, or start without the flag to serve the database's",
			ErrRequiredAdapters, describeRequired(want), describeRequired(stored))
	}
	set, err := kinds.Build(doc, s.cfg.kinds(), stored)
	if err != nil {
		return nil, fmt.Errorf("the database's required adapters: %w", err)
	}
	s.required = stored
	s.log.Info("required adapters", "of", describeRequired(stored))
	return set, nil
}

// watchRequiredAdapters returns ErrRequiredAdapters when the database's required adapters stop being the ones
// this replica serves, and nil when ctx ends.
func (s *Server) watchRequiredAdapters(ctx context.Context) error {
	every := s.cfg.RequiredAdaptersCheck
	if every <= 0 {
		every = 10 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now, err := postgres.LoadRequiredAdapters(ctx, s.db)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("could not check the database's required adapters", "error", err)
			}
			continue
		}
		if !now.Equal(s.required) {
			s.log.Error("the database's required adapters changed: stopping, to be restarted on them",
				"serving", describeRequired(s.required), "database", describeRequired(now))
			return fmt.Errorf("%w: serving %s, the database now requires %s", ErrRequiredAdapters,
				describeRequired(s.required), describeRequired(now))
		}
	}
}

// describeRequired spells required adapters as the flag takes them, kinds in order.
func describeRequired(r postgres.RequiredAdapters) string {
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(r)) {
		if len(r[kind]) > 0 {
			parts = append(parts, strings.ToLower(kind)+"="+strings.Join(r[kind], ","))
		}
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ";")
}

// openDatabase connects to the configured database, or starts the embedded one (migrating it when serving, since
// a private development database has nobody else to run migrate). Serving connections carry the statement
// timeout; migrating ones do not.
func (s *Server) openDatabase(ctx context.Context, serving bool) error {
	dsn := ""
	if s.cfg.EmbeddedDB {
		emb, err := embeddeddb.Start(ctx, embeddeddb.Config{DataDir: s.cfg.EmbeddedDataDir, Port: s.cfg.EmbeddedPort, Logger: s.log})
		if err != nil {
			return fmt.Errorf("embedded database: %w", err)
		}
		s.embedded = emb
		dsn = emb.DSN()
	} else {
		var err error
		if dsn, err = s.cfg.DB.DSN(); err != nil {
			return err
		}
	}
	timeouts := sessionTimeouts{statement: s.cfg.DB.StatementTimeout, lock: s.cfg.DB.LockTimeout}
	if !serving {
		// A migration may rightly run long (an index on a big table); waiting for locks stays bounded.
		timeouts.statement = 0
	}
	s.dsn = dsn
	db, sqlDB, err := open(ctx, dsn, s.cfg.DB.MaxOpenConns, s.cfg.DB.Debug, timeouts)
	if err != nil {
		return err
	}
	s.db, s.sqlDB = db, sqlDB
	if s.cfg.EmbeddedDB && serving {
		if err := postgres.Migrate(ctx, db); err != nil {
			return err
		}
	}
	return nil
}

// sessionTimeouts bound every statement of a connection and its waits for locks (0: no bound), so that a hung or
// locked database costs a request an error rather than holding it, and its connection, indefinitely.
type sessionTimeouts struct{ statement, lock time.Duration }

// readBufferSize is how much of a connection's socket is read at a time (see open).
const readBufferSize = 64 << 10

// open connects GORM to dsn with a bounded pool and session timeouts, and checks the connection.
func open(ctx context.Context, dsn string, maxOpen int, debug bool, timeouts sessionTimeouts) (*gorm.DB, *sql.DB, error) {
	level := gormlogger.Silent
	if debug {
		level = gormlogger.Info
	}
	connConfig, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("database URL: %w", err)
	}
	// Startup parameters: set once per connection by the server, no extra round trip per statement.
	connConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(timeouts.statement.Milliseconds(), 10)
	connConfig.RuntimeParams["lock_timeout"] = strconv.FormatInt(timeouts.lock.Milliseconds(), 10)
	// pgx reads the socket 8 KiB at a time; a list page is about 200 KiB, which PostgreSQL has mostly written by
	// the time it is read, so a larger buffer in front takes it in a few reads instead of dozens.
	connConfig.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, readBufferSize), w)
	}
	db, err := gorm.Open(pgdriver.New(pgdriver.Config{Conn: stdlib.OpenDB(*connConfig)}), &gorm.Config{
		Logger:                 gormlogger.Default.LogMode(level),
		SkipDefaultTransaction: true, // every write that needs one opens it explicitly
		TranslateError:         false,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, fmt.Errorf("database handle: %w", err)
	}
	if maxOpen <= 0 {
		maxOpen = 50
	}
	sqlDB.SetMaxOpenConns(maxOpen)
	sqlDB.SetMaxIdleConns(maxOpen)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pingCtx); err != nil {
		_ = sqlDB.Close()
		return nil, nil, fmt.Errorf("connect to database: %w", err)
	}
	return db, sqlDB, nil
}

// RunMigrations applies the migrations to the configured (or embedded) database.
func RunMigrations(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s := &Server{cfg: cfg, log: log}
	defer s.close()
	if err := s.openDatabase(ctx, false); err != nil {
		return err
	}
	start := time.Now()
	if err := postgres.Migrate(ctx, s.db); err != nil {
		return err
	}
	log.Info("schema migrated", "version", postgres.SchemaVersion(), "took", time.Since(start).String())
	if cfg.RenewFeedEpoch {
		old, renewed, err := postgres.RenewFeedEpoch(ctx, s.db)
		if err != nil {
			return err
		}
		log.Warn("renewed the change feed's epoch: every watcher and relay consumer lists again", "old", old, "new", renewed)
	}
	if cfg.RequiredAdapters == nil {
		return nil
	}
	return s.setRequiredAdapters(ctx)
}

// setRequiredAdapters makes the configured required adapters the database's. Serving replicas notice, drain and
// exit; started again, they re-aggregate every resource for them.
func (s *Server) setRequiredAdapters(ctx context.Context) error {
	doc, err := schema.Load(s.cfg.document())
	if err != nil {
		return fmt.Errorf("load openapi document: %w", err)
	}
	set, err := kinds.Build(doc, s.cfg.kinds(), s.cfg.RequiredAdapters)
	if err != nil {
		return err
	}
	want, names := requiredOf(set)
	before, err := postgres.SetRequiredAdapters(ctx, s.db, names, want)
	if err != nil {
		return err
	}
	if before.Equal(want) {
		s.log.Info("required adapters unchanged", "of", describeRequired(want))
		return nil
	}
	s.log.Warn("required adapters changed: serving replicas restart on them and re-aggregate; deleting resources "+
		"that every adapter now required has finalized are removed", "before", describeRequired(before), "after", describeRequired(want))
	return nil
}

func (s *Server) close() {
	if s.tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.tracing.shutdown(ctx); err != nil {
			s.log.Warn("flush traces", "error", err)
		}
		cancel()
	}
	for _, ln := range s.lns {
		_ = ln.Close()
	}
	if s.feedPool != nil {
		s.feedPool.Close()
	}
	if s.sqlDB != nil {
		_ = s.sqlDB.Close()
	}
	if s.embedded != nil {
		if err := s.embedded.Stop(); err != nil {
			s.log.Error("stop embedded database", "error", err)
		}
	}
}

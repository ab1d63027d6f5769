// Package httpapi is HyperFleet's HTTP edge: the router that serves every resource kind from its descriptor,
// request decoding, RFC 9457 problem answers, and the middleware that names, limits, logs and measures requests.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/swaggest/swgui/v5emb"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// BasePath is where the API lives.
const BasePath = APIRoot + "/" + APIVersion

// APIRoot is where every version of the API and the service's metadata are served.
const APIRoot = "/api/hyperfleet"

// APIVersion is the one version of the API this server serves, at BasePath.
const APIVersion = "v1"

// MetadataPath serves the service's metadata (upstream HyperFleet's path, outside any API version).
const MetadataPath = APIRoot + "/metadata"

// Service is what the handlers need of the domain.
type Service interface {
	Create(ctx context.Context, d *resource.Descriptor, parentID string, in resource.CreateInput) (*resource.Resource, error)
	Get(ctx context.Context, d *resource.Descriptor, parentID, id string) (*resource.Resource, error)
	List(ctx context.Context, d *resource.Descriptor, opts resource.ListOptions, each func(*resource.Resource) error) (resource.ListResult, error)
	Update(ctx context.Context, d *resource.Descriptor, parentID, id string, p resource.Patch, ifMatch *int64) (*resource.Resource, error)
	Delete(ctx context.Context, d *resource.Descriptor, parentID, id string) (*resource.Resource, error)
	ForceDelete(ctx context.Context, d *resource.Descriptor, parentID, id string) (*resource.Resource, error)
	PutStatus(ctx context.Context, d *resource.Descriptor, parentID, id string, rep conditions.Report) (*resource.AdapterStatus, bool, error)
	ListStatuses(ctx context.Context, d *resource.Descriptor, parentID, id string) ([]resource.AdapterStatus, error)
	History(ctx context.Context, d *resource.Descriptor, parentID, id string, after int64, limit int) ([]resource.HistoryEntry, error)
}

// Config tunes the HTTP edge.
type Config struct {
	Version string // reported by GET /api/hyperfleet/v1 and GET /api/hyperfleet/metadata
	Build   string
	// BuildTime is when the binary was built, RFC 3339 ("" when the build did not stamp it): GET
	// /api/hyperfleet/metadata's build_timestamp.
	BuildTime    string
	MaxBodyBytes int64
	OpenAPIYAML  []byte // the public document served at /openapi
	OpenAPIJSON  []byte
	// Authenticate returns who sent a request; nil turns authentication off and makes every caller a
	// development admin.
	Authenticate func(*http.Request) (auth.Identity, error)
	// Authorize enforces roles per route (see auth.Authorize); off, every authenticated caller may do everything.
	Authorize bool
	// RateLimit is the sustained requests per second each identity may make (0: unlimited), RateBurst the
	// bucket size (0: one second's worth).
	RateLimit float64
	RateBurst int
	// AdapterRateLimit and AdapterRateBurst are the same for callers with role adapter, per identity and shard
	// (api.ShardHeader), in place of RateLimit: an adapter's replicas reconcile a fleet (0: unlimited).
	AdapterRateLimit float64
	AdapterRateBurst int
	// TenantRateLimits returns the tenants' budgets per route class as configured now (it is called per request
	// of a caller confined to a tenant, so that a reloaded file applies at once); each request must pass its
	// tenant's bucket as well as its identity's. nil, or nil from it: tenants are not limited as such.
	TenantRateLimits func() *TenantRateLimits
	// Feed is the change feed that watches follow and lists report their position in; nil serves neither
	// (lists then report an empty position).
	Feed ChangeFeed
	// WatchHeartbeat is how long a watch stream may show nothing before a bookmark event, its heartbeat, says how
	// far it has read the feed (default 15 s).
	WatchHeartbeat time.Duration
	// WatchesPerIdentity and WatchesTotal bound the watch streams open at once, per identity and in this process
	// (0: no bound); one more is 429 HYPERFLEET-LMT-004 with Retry-After.
	WatchesPerIdentity int
	WatchesTotal       int
	// WatchMaxLifetime ends a watch stream cleanly after at most this long (less up to a tenth, at random), so
	// that its client resumes and authenticates again (0: no limit).
	WatchMaxLifetime time.Duration
	// ListsPerIdentity bounds the lists (searches included) one identity may have running at once (0: no bound);
	// one more is 429 HYPERFLEET-LMT-004 with Retry-After.
	ListsPerIdentity int
	// Tenancy confines every caller but admins and adapters to the tenant its token names (auth.Identity.Tenant);
	// off, every resource is in resource.DefaultTenant and every caller sees it.
	Tenancy bool
	// Tenants serves /tenants and /tenant (resource.Tenants); nil answers them 404.
	Tenants TenantService
	// ShardLeases serves /adapters/{adapter}/shard-leases (resource.ShardLeases); nil answers it 404.
	ShardLeases ShardLeaseService
}

// ChangeFeed is what the HTTP edge needs of the change feed (feed.Feed).
type ChangeFeed interface {
	Head() resource.Position
	Check(ctx context.Context, after resource.Position) error
	Next(ctx context.Context, after resource.Position, limit int) ([]resource.Event, error)
}

// Handler is the API's http.Handler: the router with every kind's routes and the middleware around them.
type Handler struct {
	cfg     Config
	svc     Service
	log     *slog.Logger
	metrics *httpMetrics
	// rates are the request budgets; nil: unlimited.
	rates  *rateLimiter
	router *mux.Router
	// watches and lists count the open watch streams and running lists.
	watches, lists *concurrency
	// stopping is closed by StopStreams: every watch stream ends.
	stopping chan struct{}
	stopOnce sync.Once
}

// StopStreams ends every watch stream cleanly (a bookmark, then the end of the stream, from which its client
// resumes), as the server shuts down: http.Server.Shutdown waits for open requests, and a stream never ends by
// itself. Register it with http.Server.RegisterOnShutdown. Streams opened later end at once.
func (s *Handler) StopStreams() { s.stopOnce.Do(func() { close(s.stopping) }) }

// NewHandler builds the router for kinds. It returns an error if a descriptor is malformed.
func NewHandler(cfg Config, svc Service, kinds []*resource.Descriptor, log *slog.Logger, reg prometheus.Registerer) (*Handler, error) {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	s := &Handler{cfg: cfg, svc: svc, log: log, stopping: make(chan struct{}),
		watches: newConcurrency(cfg.WatchesPerIdentity, cfg.WatchesTotal), lists: newConcurrency(cfg.ListsPerIdentity, 0)}
	m, err := newHTTPMetrics(reg)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.rates = newRateLimiter(cfg)
	r := mux.NewRouter()
	// mux runs middleware for matched routes only; the fallbacks get the same request ids, logs and metrics.
	r.NotFoundHandler = s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, resource.Errorf(resource.CodeNotFound, "no route for %s", r.URL.Path))
	}))
	r.MethodNotAllowedHandler = s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, &resource.Error{Code: resource.CodeMethodNotAllowed, Message: fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path)})
	}))
	r.HandleFunc(BasePath, s.apiInfo).Methods(http.MethodGet)
	r.HandleFunc(MetadataPath, s.metadata).Methods(http.MethodGet)
	r.HandleFunc("/openapi", s.openAPI).Methods(http.MethodGet)
	// Swagger UI from assets embedded in the binary (no CDN), reading the public document above.
	ui := v5emb.New("HyperFleet API", "/openapi?format=json", "/openapi-ui/")
	r.Handle("/openapi-ui", http.RedirectHandler("/openapi-ui/", http.StatusMovedPermanently)).Methods(http.MethodGet)
	r.PathPrefix("/openapi-ui/").Handler(ui).Methods(http.MethodGet)
	resources := r.PathPrefix(BasePath).Subrouter()
	for _, d := range kinds {
		if err := d.Check(); err != nil {
			return nil, err
		}
		if d.Parent != nil && d.Parent.Parent != nil {
			return nil, fmt.Errorf("descriptor %s: only one level of parent is routed", d.Kind)
		}
		k := &kindHandler{s: s, d: d}
		// Platform objects are shared by many clusters: writing one needs more than writing one's own resources.
		write := auth.ActionWriteResource
		if d.Platform {
			write = auth.ActionWritePlatform
		}
		collection := "/" + d.Plural
		if d.Parent != nil {
			collection = "/" + d.Parent.Plural + "/{parent_id}/" + d.Plural
			// The flat list of every parent's children is read-only.
			resources.Handle("/"+d.Plural, k.route(auth.ActionRead, k.list)).Methods(http.MethodGet)
		}
		item := collection + "/{id}"
		resources.Handle(collection, k.route(auth.ActionRead, k.list)).Methods(http.MethodGet)
		resources.Handle(collection, k.route(write, k.create)).Methods(http.MethodPost)
		resources.Handle(item, k.route(auth.ActionRead, k.get)).Methods(http.MethodGet)
		resources.Handle(item, k.route(write, k.patch)).Methods(http.MethodPatch)
		resources.Handle(item, k.route(write, k.remove)).Methods(http.MethodDelete)
		resources.Handle(item+"/statuses", k.route(auth.ActionRead, k.listStatuses)).Methods(http.MethodGet)
		// The role is checked before the body is read; which adapter a report speaks for is in its body, so
		// putStatus checks the adapter name once it has read it.
		resources.Handle(item+"/statuses", k.route(auth.ActionWriteStatus, k.putStatus)).Methods(http.MethodPost, http.MethodPut)
		resources.Handle(item+"/force-delete", k.route(auth.ActionForceDelete, k.forceDelete)).Methods(http.MethodPost)
		resources.Handle(item+"/history", k.route(auth.ActionRead, k.history)).Methods(http.MethodGet)
	}
	s.routeTenants(resources)
	s.routeShardLeases(resources)
	// Everything is named, logged and measured; only the resource API needs a caller, a rate and a body limit,
	// so the version, the metadata, the OpenAPI document and the UI stay public (as upstream's metadata is).
	r.Use(s.observe)
	resources.Use(s.authenticate, s.rateLimit, s.limitBody)
	s.router = r
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Route is one method and path template the server answers, with the template's variables as the router names them.
type Route struct {
	Method string
	Path   string
}

// Routes returns every method and path template the server answers under APIRoot, which is what
// openapi/openapi.yaml describes; tests check that the two are the same set.
func (s *Handler) Routes() ([]Route, error) {
	var out []Route
	err := s.router.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, err := route.GetPathTemplate()
		if err != nil || !strings.HasPrefix(path, APIRoot+"/") {
			return nil //nolint:nilerr // a route without a path template (a prefix) is not an operation
		}
		methods, err := route.GetMethods()
		if err != nil {
			return nil //nolint:nilerr // a subrouter's prefix route has no methods
		}
		for _, m := range methods {
			out = append(out, Route{Method: m, Path: path})
		}
		return nil
	})
	return out, err
}

// devAdmin is every caller while authentication is off.
var devAdmin = auth.Identity{Subject: "dev-admin", Roles: []auth.Role{auth.RoleAdmin}}

type callerIdentityKey struct{}

func (s *Handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := devAdmin
		if s.cfg.Authenticate != nil {
			var err error
			if id, err = s.cfg.Authenticate(r); err != nil {
				writeError(w, r, s.log, err)
				return
			}
		}
		setIdentity(r.Context(), id.Subject)
		caller := s.callerOf(id)
		if !caller.AllTenants && caller.Tenant == "" {
			writeError(w, r, s.log, &resource.Error{Code: resource.CodeForbidden,
				Message: "the token names no tenant: tenancy is on, and only admins and adapters may go without one"})
			return
		}
		ctx := context.WithValue(resource.WithCaller(r.Context(), caller), callerIdentityKey{}, id)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// callerOf is the domain's view of an identity. Admins and adapters see every tenant; so does everyone while
// tenancy is off, when every resource is in the default tenant.
func (s *Handler) callerOf(id auth.Identity) resource.Caller {
	admin := !s.cfg.Authorize || id.HasRole(auth.RoleAdmin)
	c := resource.Caller{Name: id.Subject, Admin: admin, Tenant: id.Tenant}
	switch {
	case !s.cfg.Tenancy:
		c.Tenant, c.AllTenants = resource.DefaultTenant, true
	case admin || id.HasRole(auth.RoleAdapter):
		c.AllTenants = true
	}
	return c
}

// authorize checks the request's identity for action (adapter: the adapter a status report speaks for).
func (s *Handler) authorize(r *http.Request, action auth.Action, adapter string) error {
	if !s.cfg.Authorize {
		return nil
	}
	id, _ := r.Context().Value(callerIdentityKey{}).(auth.Identity)
	return auth.Authorize(id, action, adapter)
}

// authorizeReportKind checks that the request's identity may report on d's resources at all (auth.AuthorizeReportKind).
func (s *Handler) authorizeReportKind(r *http.Request, d *resource.Descriptor) error {
	if !s.cfg.Authorize {
		return nil
	}
	id, _ := r.Context().Value(callerIdentityKey{}).(auth.Identity)
	return auth.AuthorizeReportKind(id, d.Kind, d.Plural, d.RequiredAdapters)
}

// forced reads a PATCH's force query parameter (true: apply a change the kind's transition rules refuse), which
// only admins may give.
func (s *Handler) forced(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("force")
	if v == "" {
		return false, nil
	}
	force, err := strconv.ParseBool(v)
	if err != nil {
		return false, badParam("force", "must be true or false")
	}
	if force {
		if err := s.authorize(r, auth.ActionForceTransition, ""); err != nil {
			return false, err
		}
	}
	return force, nil
}

// allow wraps a handler with the authorization of its route class.
func (s *Handler) allow(action auth.Action, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r, action, auth.AnyAdapter); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		h(w, r)
	})
}

func (s *Handler) apiInfo(w http.ResponseWriter, r *http.Request) {
	s.respond(w, r, http.StatusOK, api.APIInfo{Kind: "API", Version: s.cfg.Version, Build: s.cfg.Build})
}

// metadata answers upstream HyperFleet's GET /api/hyperfleet/metadata: the service, its build and the API
// versions it serves. A build time that does not parse (a hand-made -ldflags) is left out rather than failing
// the request; the version and commit still say what runs.
func (s *Handler) metadata(w http.ResponseWriter, r *http.Request) {
	md := api.Metadata{Service: "hyperfleet-api", Version: s.cfg.Version, ApiVersions: []string{APIVersion}, GitSha: s.cfg.Build}
	if t, err := time.Parse(time.RFC3339, s.cfg.BuildTime); err == nil {
		md.BuildTimestamp = &t
	}
	s.respond(w, r, http.StatusOK, md)
}

func (s *Handler) openAPI(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.cfg.OpenAPIJSON)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.cfg.OpenAPIYAML)
}

// respond writes v as the answer's JSON body.
func (s *Handler) respond(w http.ResponseWriter, r *http.Request, status int, v any) {
	s.respondAs(w, r, status, "application/json", v)
}

// respondAs writes v as a JSON body of the given media type. Once the status is sent nothing can be taken back, so
// an error is only logged: one that encoding v causes is a bug; a failed write is a client that went away.
func (s *Handler) respondAs(w http.ResponseWriter, r *http.Request, status int, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	logEncodeError(r, s.log, json.NewEncoder(w).Encode(v))
}

func logEncodeError(r *http.Request, log *slog.Logger, err error) {
	if err == nil {
		return
	}
	var unsupported *json.UnsupportedValueError
	var unsupportedType *json.UnsupportedTypeError
	var marshaler *json.MarshalerError
	if errors.As(err, &unsupported) || errors.As(err, &unsupportedType) || errors.As(err, &marshaler) {
		log.ErrorContext(r.Context(), "encoding the answer failed", "error", err, "request_id", requestID(r.Context()))
		return
	}
	log.DebugContext(r.Context(), "writing the answer failed; the client went away", "error", err, "request_id", requestID(r.Context()))
}

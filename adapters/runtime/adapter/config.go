package adapter

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// basePath is where hyperfleet-api serves its resources.
const basePath = "/api/hyperfleet/v1"

// MaxShards bounds --shard-count.
const MaxShards = 1024

// Config is what every adapter binary is configured with; AddFlags binds it to a command's flags.
type Config struct {
	// Adapter is the name the adapter reports under (its statuses' adapter field), e.g. "version-resolver".
	Adapter string
	// APIURL is hyperfleet-api's address, e.g. http://localhost:8000 (the base path is added if missing).
	APIURL string
	// TokenFile holds the bearer token for the API; empty for an API without authentication.
	TokenFile string
	// PollInterval is how often the poll source asks for pending resources.
	PollInterval time.Duration
	// ResyncAfter also polls resources last reported on longer ago than this; 0 polls only changes.
	ResyncAfter time.Duration
	// Workers reconcile in parallel; one key is never in two workers.
	Workers int
	// ShardIndex and ShardCount split the fleet between replicas by a hash of the resource id.
	ShardIndex, ShardCount int
	// OpsBindAddress serves /healthz, /readyz and /metrics.
	OpsBindAddress string
	// ReconcileTimeout bounds one Reconcile or Finalize.
	ReconcileTimeout time.Duration
	// DrainTimeout is how long in-flight reconciles may run on after SIGTERM before they are cancelled.
	DrainTimeout time.Duration
	// BackoffBase and BackoffMax bound the per-key retry delay after failures.
	BackoffBase, BackoffMax time.Duration
	// PageSize is the page size of pending polls.
	PageSize int
	// Replica names this process in its reports' metadata (default: the host name).
	Replica string
	// Clock drives polls, delays and backoff; nil is the real clock. Tests use a fake one.
	Clock clock.WithTicker
	// Transport carries the requests to the API; nil is a clone of http.DefaultTransport. Tests wrap it to check
	// every answer against the OpenAPI document.
	Transport http.RoundTripper
}

// DefaultOpsBindAddress returns the ops listener's address on port when none is given. With HYPERFLEET_ENV=production
// it is every interface, since kubelet probes and Prometheus connect from outside the pod; otherwise loopback, so
// that an adapter started for development is not reachable from the network. hyperfleet-api reads the same variable
// for its own listeners.
func DefaultOpsBindAddress(port string) string {
	if os.Getenv("HYPERFLEET_ENV") == "production" {
		return net.JoinHostPort("", port)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// Defaults returns the configuration an adapter starts from before flags; opsAddr is usually
// DefaultOpsBindAddress's.
func Defaults(adapter string, opsAddr string) Config {
	return Config{
		Adapter: adapter, APIURL: "http://localhost:8000", PollInterval: 5 * time.Second,
		Workers: 8, ShardIndex: 0, ShardCount: 1, OpsBindAddress: opsAddr, ReconcileTimeout: 2 * time.Minute,
		DrainTimeout: 30 * time.Second, BackoffBase: DefaultBackoffBase, BackoffMax: DefaultBackoffMax, PageSize: 500,
	}
}

// AddFlags binds the runtime's flags, with c's values as defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.APIURL, "api-url", c.APIURL, "hyperfleet-api address")
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "file holding the bearer token for the API, re-read when it changes (empty: no authentication)")
	fs.StringVar(&c.Adapter, "adapter-name", c.Adapter, "name the adapter reports its statuses under")
	fs.DurationVar(&c.PollInterval, "poll-interval", c.PollInterval, "how often to ask the API for pending resources")
	fs.DurationVar(&c.ResyncAfter, "resync-after", c.ResyncAfter, "also reconcile resources last reported on longer ago than this (0: only changes)")
	fs.IntVar(&c.Workers, "workers", c.Workers, "resources reconciled in parallel")
	fs.IntVar(&c.ShardIndex, "shard-index", c.ShardIndex, "this replica's shard, 0 ≤ index < count")
	fs.IntVar(&c.ShardCount, "shard-count", c.ShardCount, "replicas splitting the fleet (every replica needs the same count)")
	fs.StringVar(&c.OpsBindAddress, "ops-bind-address", c.OpsBindAddress, "address of /healthz, /readyz and /metrics; loopback unless HYPERFLEET_ENV=production")
	fs.DurationVar(&c.ReconcileTimeout, "reconcile-timeout", c.ReconcileTimeout, "longest one reconcile may take")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "how long in-flight work may finish after SIGTERM")
	fs.StringVar(&c.Replica, "replica", c.Replica, "this replica's name in report metadata (default: host name)")
}

// Check returns every setting that cannot work, in one error.
func (c *Config) Check() error {
	var errs []error
	if !conditions.ValidAdapterName(c.Adapter) {
		errs = append(errs, fmt.Errorf("--adapter-name %q must be a DNS label of at most %d characters", c.Adapter, conditions.MaxAdapterName))
	}
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--api-url %q must be an http(s) URL", c.APIURL))
	}
	if c.ShardCount > MaxShards {
		errs = append(errs, fmt.Errorf("--shard-count %d is above the most replicas that can split a fleet, %d", c.ShardCount, MaxShards))
	}
	if c.ShardCount < 1 || c.ShardIndex < 0 || c.ShardIndex >= c.ShardCount {
		errs = append(errs, fmt.Errorf("--shard-index %d must be in [0, --shard-count %d)", c.ShardIndex, c.ShardCount))
	}
	for name, d := range map[string]time.Duration{"--poll-interval": c.PollInterval, "--reconcile-timeout": c.ReconcileTimeout,
		"--drain-timeout": c.DrainTimeout, "backoff base": c.BackoffBase, "backoff max": c.BackoffMax} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", name))
		}
	}
	if c.BackoffBase > c.BackoffMax {
		errs = append(errs, fmt.Errorf("backoff base %s is above backoff max %s", c.BackoffBase, c.BackoffMax))
	}
	if c.ResyncAfter < 0 {
		errs = append(errs, errors.New("--resync-after must not be negative"))
	}
	if c.Workers < 1 {
		errs = append(errs, errors.New("--workers must be at least 1"))
	}
	if c.PageSize < 1 || c.PageSize > 500 {
		errs = append(errs, errors.New("page size must be 1–500"))
	}
	return errors.Join(errs...)
}

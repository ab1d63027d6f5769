// Package cincinnati is a client for the Cincinnati update service
// (api.openshift.com/api/upgrades_info) and the pure release-selection rules the
// version resolver applies to the graphs it returns.
package cincinnati

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Sentinel errors returned (wrapped) by Client.Graph; check them with errors.Is.
var (
	// ErrUnavailable means Cincinnati could not be reached or answered with a
	// transient failure: a network error, a timeout, 408, 429 or any 5xx. Retry later.
	ErrUnavailable = errors.New("cincinnati unavailable")
	// ErrBadResponse means Cincinnati answered 2xx but the body was not a graph:
	// invalid JSON or larger than the body cap. Usually transient (a proxy or a
	// half-deployed service), but distinct from ErrUnavailable so it can be reported.
	ErrBadResponse = errors.New("cincinnati bad response")
	// ErrRejected means Cincinnati refused the request with a 4xx (other than 408
	// and 429), for example an unknown channel. The wrapping error carries the
	// status and, when the body is a Cincinnati error, its kind and value.
	// Retrying the same request will not help.
	ErrRejected = errors.New("cincinnati rejected request")
)

// GraphPath is the path of the graph endpoint, relative to the base URL.
const GraphPath = "/api/upgrades_info/v1/graph"

const (
	// DefaultTimeout bounds one Graph call, connection to last body byte.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxBodyBytes caps the graph body; real graphs are a few MiB.
	DefaultMaxBodyBytes int64 = 16 << 20
	// maxErrorBodyBytes caps how much of a non-2xx body is read to find {kind, value}.
	maxErrorBodyBytes = 64 << 10
)

// Graph is a Cincinnati update graph. Edges index into Nodes; they and the
// conditional edges are decoded but not validated, since release selection does
// not use them yet.
type Graph struct {
	Version          int               `json:"version"`
	Nodes            []Node            `json:"nodes"`
	Edges            [][2]int          `json:"edges"`
	ConditionalEdges []ConditionalEdge `json:"conditionalEdges,omitempty"`
}

// ConditionalEdge is one entry of a graph's conditionalEdges: update edges that
// are recommended only where none of the risks applies. Cincinnati groups every
// edge that carries the same set of risks into one entry.
type ConditionalEdge struct {
	Edges []Edge `json:"edges"`
	Risks []Risk `json:"risks"`
}

// Edge is a conditional update from one release to another, named by version
// (not by node index, unlike Graph.Edges).
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Risk is a known issue that gates a conditional edge, as the cluster-version
// operator sees it (config.openshift.io/v1 ConditionalUpdateRisk).
type Risk struct {
	// Name is a CamelCase identifier, e.g. "HyperShiftKubeAPIPort443"; risks are
	// accepted by name.
	Name    string `json:"name"`
	URL     string `json:"url"`
	Message string `json:"message"`
	// MatchingRules say which clusters the risk applies to; the first rule the
	// evaluator understands decides.
	MatchingRules []MatchingRule `json:"matchingRules"`
}

// MatchingRule is one way to decide whether a risk applies: Type "Always", or
// "PromQL" with PromQL set.
type MatchingRule struct {
	Type   string  `json:"type"`
	PromQL *PromQL `json:"promql,omitempty"`
}

// PromQL is a PromQL matching rule: the risk applies where the query returns 1,
// not where it returns 0.
type PromQL struct {
	PromQL string `json:"promql"`
}

// The matching rule types Cincinnati serves.
const (
	RuleAlways = "Always"
	RulePromQL = "PromQL"
)

// Node is one release in a Graph: its semver version, its payload (the release
// image pull spec) and Cincinnati's metadata.
type Node struct {
	Version  string            `json:"version"`
	Payload  string            `json:"payload"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// errorBody is the error document Cincinnati returns with 4xx/5xx.
type errorBody struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// Client fetches graphs from one Cincinnati instance. It is safe for
// concurrent use.
type Client struct {
	baseURL      string
	httpClient   *http.Client
	timeout      time.Duration
	maxBodyBytes int64
	userAgent    string
}

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets the bound on one Graph call (default DefaultTimeout). The
// timeout is applied through the request context, so the *http.Client given to
// NewClient is never modified. A value <= 0 keeps the default.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithMaxBodyBytes sets the largest graph body accepted (default
// DefaultMaxBodyBytes); a larger body yields ErrBadResponse. A value <= 0 keeps
// the default.
func WithMaxBodyBytes(n int64) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxBodyBytes = n
		}
	}
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// NewClient returns a Client for the Cincinnati instance at baseURL (for
// example "https://api.openshift.com"; a path prefix is kept). httpClient may be
// nil, in which case a new default client is used; pass one to add transport
// middleware such as logging. An invalid baseURL is reported by Graph, not here.
func NewClient(baseURL string, httpClient *http.Client, opts ...Option) *Client {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	c := &Client{
		baseURL:      baseURL,
		httpClient:   httpClient,
		timeout:      DefaultTimeout,
		maxBodyBytes: DefaultMaxBodyBytes,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Graph fetches the update graph of channel (e.g. "stable-4.16", see Channel)
// for arch (e.g. "amd64", see Arch) with
// GET <base>/api/upgrades_info/v1/graph?arch=…&channel=….
//
// Errors wrap ErrUnavailable (network error, timeout, cancelled ctx, 408, 429,
// 5xx), ErrRejected (other 4xx; the message includes Cincinnati's kind and
// value, e.g. for an unknown channel) or ErrBadResponse (invalid JSON, body over
// the cap, unexpected non-2xx status). Network and context errors are wrapped
// too, so errors.Is(err, context.DeadlineExceeded) still works. The body is
// never read beyond the cap.
func (c *Client) Graph(ctx context.Context, channel, arch string) (*Graph, error) {
	u, err := c.graphURL(channel, arch)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("cincinnati: build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}

	resp, err := c.httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: GET %s: %w", ErrUnavailable, u, err)
	}
	defer func() { _ = resp.Body.Close() }()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.statusError(resp, channel, arch)
	}

	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBodyBytes+1))
	if err != nil {
		// A read error mid-body is a broken connection or the timeout firing.
		return nil, fmt.Errorf("%w: read graph %s/%s: %w", ErrUnavailable, channel, arch, err)
	}
	if int64(len(body)) > c.maxBodyBytes {
		return nil, fmt.Errorf("%w: graph %s/%s larger than %d bytes", ErrBadResponse, channel, arch, c.maxBodyBytes)
	}
	var g Graph
	if err := json.Unmarshal(body, &g); err != nil {
		return nil, fmt.Errorf("%w: decode graph %s/%s: %w", ErrBadResponse, channel, arch, err)
	}
	return &g, nil
}

func (c *Client) graphURL(channel, arch string) (string, error) {
	base, err := url.Parse(c.baseURL)
	if err != nil {
		return "", fmt.Errorf("cincinnati: invalid base URL %q: %w", c.baseURL, err)
	}
	if base.Scheme == "" || base.Host == "" {
		return "", fmt.Errorf("cincinnati: invalid base URL %q: want scheme://host[/prefix]", c.baseURL)
	}
	u := base.JoinPath(GraphPath)
	u.RawQuery = url.Values{"channel": {channel}, "arch": {arch}}.Encode()
	return u.String(), nil
}

// statusError classifies a non-2xx response; it reads at most
// maxErrorBodyBytes of the body looking for a Cincinnati {kind, value}.
func (c *Client) statusError(resp *http.Response, channel, arch string) error {
	detail := fmt.Sprintf("HTTP %d", resp.StatusCode)
	// A body cut short still classifies by status; what was read may still name the kind.
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
	var eb errorBody
	if json.Unmarshal(raw, &eb) == nil && readErr == nil && (eb.Kind != "" || eb.Value != "") {
		detail = fmt.Sprintf("%s: %s: %s", detail, eb.Kind, eb.Value)
	}

	var sentinel error
	switch code := resp.StatusCode; {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		sentinel = ErrUnavailable
	case code >= 400:
		sentinel = ErrRejected
	default:
		// 1xx/3xx that the http.Client did not resolve: not something we can use.
		sentinel = ErrBadResponse
	}
	return fmt.Errorf("%w: graph %s/%s: %s", sentinel, channel, arch, detail)
}

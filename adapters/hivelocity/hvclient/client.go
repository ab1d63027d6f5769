package hvclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/antihax/optional"
	hv "github.com/hivelocity/hivelocity-client-go/client"
)

// DefaultURL is the Hivelocity API v2.
const DefaultURL = "https://core.hivelocity.net/api/v2"

// DefaultTimeout bounds one request unless Config.Timeout says otherwise.
const DefaultTimeout = 30 * time.Second

// Config configures a Client.
type Config struct {
	// URL is the API's base URL: DefaultURL, or a simulator's address (with or without /api/v2).
	URL string
	// APIKeyFile holds the X-API-KEY; it is read again when it changes, and at once after a 401.
	APIKeyFile string
	// Transport carries the requests; nil is http.DefaultTransport. The provisioner passes the runtime's
	// ExternalTransport, so that every call that reaches the API is counted.
	Transport http.RoundTripper
	// Timeout bounds one request; 0 is DefaultTimeout.
	Timeout time.Duration
	// RPS and Burst are the token bucket every request of the Client takes from; RPS ≤ 0 means no bucket (the
	// pause after a 429 still applies).
	RPS   float64
	Burst int
	// UserAgent names the caller to the API.
	UserAgent string
}

// Client calls the Hivelocity API through the official client. All methods are safe for concurrent use, and all
// share one request budget.
type Client struct {
	api      *hv.APIClient
	key      *keyFile
	throttle *throttle
}

// New returns a client for cfg. It fails if the URL is not http(s) or the API key file cannot be read or is
// empty (wrapping ErrUnauthorized).
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("hivelocity URL %q must be an http(s) URL", cfg.URL)
	}
	key, err := newKeyFile(cfg.APIKeyFile)
	if err != nil {
		return nil, err
	}
	base := cfg.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t := newThrottle(base, cfg.RPS, cfg.Burst)
	hc := hv.NewConfiguration()
	hc.BasePath = strings.TrimRight(cfg.URL, "/")
	if cfg.UserAgent != "" {
		hc.UserAgent = cfg.UserAgent
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	hc.HTTPClient = &http.Client{Transport: t, Timeout: timeout}
	return &Client{api: hv.NewAPIClient(hc), key: key, throttle: t}, nil
}

// PausedFor returns how much is left of a pause of every call after a 429, 0 when calls may go out.
func (c *Client) PausedFor() time.Duration { return c.throttle.pausedFor() }

// Reserve waits for n requests' worth of the request budget and returns a context whose next n requests go out
// without waiting for it (they still pause after a 429). n must not exceed the budget's burst. The error wraps
// ErrLate when the budget cannot give n requests before ctx's send deadline (SendBy), and ErrRateLimited when
// calls are paused or the budget cannot give them before ctx's deadline.
func (c *Client) Reserve(ctx context.Context, n int) (context.Context, error) {
	rctx, err := c.throttle.reserve(ctx, n)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Op = "Reserve"
			return nil, e
		}
		return nil, &Error{Op: "Reserve", kind: ErrUnavailable, cause: err}
	}
	return rctx, nil
}

// call runs one call of the official client with the API key, and classifies its outcome.
func (c *Client) call(ctx context.Context, op string, fn func(ctx context.Context) (*http.Response, error)) error {
	key, err := c.key.Key()
	if err != nil {
		return &Error{Op: op, kind: ErrUnauthorized, cause: err}
	}
	resp, err := fn(context.WithValue(ctx, hv.ContextAPIKey, hv.APIKey{Key: key})) //nolint:bodyclose // the official client reads and closes every body
	cerr := classify(ctx, op, resp, err)
	var e *Error
	if errors.As(cerr, &e) {
		switch {
		case errors.Is(e, ErrUnauthorized):
			c.key.invalidate()
		case errors.Is(e, ErrRateLimited) && e.RetryAfter == 0:
			e.RetryAfter = max(c.throttle.pausedFor(), time.Second)
		}
	}
	return cerr
}

// ListDevices returns every bare-metal device of the account (GET /bare-metal-devices/).
func (c *Client) ListDevices(ctx context.Context) ([]Device, error) {
	var list []hv.BareMetalDevice
	err := c.call(ctx, "GetBareMetalDeviceResource", func(ctx context.Context) (*http.Response, error) {
		var (
			resp *http.Response
			err  error
		)
		list, resp, err = c.api.BareMetalDevicesApi.GetBareMetalDeviceResource(ctx, nil)
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(list))
	for i := range list {
		out = append(out, deviceOf(&list[i]))
	}
	return out, nil
}

// GetDevice returns one device (GET /bare-metal-devices/{id}); ErrNotFound if it does not exist.
func (c *Client) GetDevice(ctx context.Context, id int32) (Device, error) {
	var d hv.BareMetalDevice
	err := c.call(ctx, "GetBareMetalDeviceIdResource", func(ctx context.Context) (*http.Response, error) {
		var (
			resp *http.Response
			err  error
		)
		d, resp, err = c.api.BareMetalDevicesApi.GetBareMetalDeviceIdResource(ctx, id, nil)
		return resp, err
	})
	if err != nil {
		return Device{}, err
	}
	return deviceOf(&d), nil
}

// Status returns a device's provisioning state (GET /device/{id}); ErrNotFound if it does not exist.
func (c *Client) Status(ctx context.Context, id int32) (Status, error) {
	var d hv.DeviceDump
	err := c.call(ctx, "GetDeviceIdResource", func(ctx context.Context) (*http.Response, error) {
		var (
			resp *http.Response
			err  error
		)
		d, resp, err = c.api.DeviceApi.GetDeviceIdResource(ctx, id, nil)
		return resp, err
	})
	if err != nil {
		return Status{}, err
	}
	st := Status{ID: d.DeviceId, Reloading: d.IsReload, SPSStatus: d.SpsStatus, Tags: clone(d.Tags)}
	st.Power, _ = d.PowerStatus.(string)
	if loc, ok := d.Location.(map[string]any); ok {
		st.Location, _ = loc["facilityCode"].(string)
	}
	if st.ID == 0 {
		st.ID = id
	}
	return st, nil
}

// SetTags replaces the device's tags with tags (PUT /device/{id}/tags). The API replaces the whole list: a
// concurrent writer's list is lost, which is why claims need the protocol in package hivelocity.
func (c *Client) SetTags(ctx context.Context, id int32, tags []string) error {
	return c.call(ctx, "PutDeviceTagIdResource", func(ctx context.Context) (*http.Response, error) {
		_, resp, err := c.api.DeviceApi.PutDeviceTagIdResource(ctx, id, hv.DeviceTag{Tags: clone(tags)}, nil)
		return resp, err
	})
}

// Reload reinstalls the device (PUT /bare-metal-devices/{id} with forceReload) and replaces its tags with
// r.Tags. The API refuses (ErrRejected) a reload of a device that is already reloading (409) or, without
// SkipPowerCheck, still powered on (400).
func (c *Client) Reload(ctx context.Context, id int32, r Reload) error {
	body := hv.BareMetalDeviceUpdate{ForceReload: true, OsName: r.OSName, Hostname: r.Hostname, Script: r.Script,
		PublicSshKeyId: r.SSHKeyID, Tags: clone(r.Tags)}
	var opts *hv.BareMetalDevicesApiPutBareMetalDeviceIdResourceOpts
	if r.SkipPowerCheck {
		opts = &hv.BareMetalDevicesApiPutBareMetalDeviceIdResourceOpts{SkipPowerCheck: optional.NewBool(true)}
	}
	return c.call(ctx, "PutBareMetalDeviceIdResource", func(ctx context.Context) (*http.Response, error) {
		_, resp, err := c.api.BareMetalDevicesApi.PutBareMetalDeviceIdResource(ctx, id, body, opts)
		return resp, err
	})
}

// Power starts a power action (POST /device/{id}/power). The API refuses (ErrRejected) a shutdown of a device
// that is off, a boot of one that is on, and any action while it reloads.
func (c *Client) Power(ctx context.Context, id int32, action PowerAction) error {
	return c.call(ctx, "PostPowerResource", func(ctx context.Context) (*http.Response, error) {
		_, resp, err := c.api.DeviceApi.PostPowerResource(ctx, id, string(action), nil)
		return resp, err
	})
}

// SSHKeys returns the account's public SSH keys (GET /ssh_key/).
func (c *Client) SSHKeys(ctx context.Context) ([]SSHKey, error) {
	var list []hv.SshKeyResponse
	err := c.call(ctx, "GetSshKeyResource", func(ctx context.Context) (*http.Response, error) {
		var (
			resp *http.Response
			err  error
		)
		list, resp, err = c.api.SshKeyApi.GetSshKeyResource(ctx, nil)
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]SSHKey, 0, len(list))
	for _, k := range list {
		out = append(out, SSHKey{ID: k.SshKeyId, Name: k.Name})
	}
	return out, nil
}

// OperatingSystems returns the names of the operating systems a product can be reloaded with (GET
// /product/{id}/operating-systems); ErrNotFound for an unknown product.
func (c *Client) OperatingSystems(ctx context.Context, productID int32) ([]string, error) {
	var list []hv.OptionDump
	err := c.call(ctx, "GetProductOperatingSystemsResource", func(ctx context.Context) (*http.Response, error) {
		var (
			resp *http.Response
			err  error
		)
		list, resp, err = c.api.ProductApi.GetProductOperatingSystemsResource(ctx, productID, nil)
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list))
	for _, o := range list {
		out = append(out, o.Name)
	}
	return out, nil
}

func deviceOf(d *hv.BareMetalDevice) Device {
	return Device{ID: d.DeviceId, Hostname: d.Hostname, Location: d.LocationName, ProductID: d.ProductId,
		ProductName: d.ProductName, PrimaryIP: d.PrimaryIp, Power: d.PowerStatus, OSName: d.OsName, Tags: clone(d.Tags)}
}

// clone copies a tag list; nil stays nil.
func clone(tags []string) []string {
	if tags == nil {
		return nil
	}
	return append([]string(nil), tags...)
}

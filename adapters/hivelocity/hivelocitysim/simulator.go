// Package hivelocitysim simulates the subset of the Hivelocity API v2 that the Hivelocity provisioner uses, for
// development and tests, faithful to what the official client github.com/hivelocity/hivelocity-client-go (v0.2.0)
// sends and expects:
//
//	GET  /bare-metal-devices/                    → []BareMetalDevice
//	GET  /bare-metal-devices/{deviceId}          → BareMetalDevice
//	PUT  /bare-metal-devices/{deviceId}          BareMetalDeviceUpdate (?skipPowerCheck=true) → BareMetalDevice; reloads
//	GET  /device/{deviceId}                      → DeviceDump (isReload, spsStatus, powerStatus)
//	GET  /device/{deviceId}/tags                 → DeviceTag
//	PUT  /device/{deviceId}/tags                 DeviceTag → DeviceTag (the list is replaced, never merged)
//	GET  /device/{deviceId}/power                → DevicePower
//	POST /device/{deviceId}/power?action=boot|reboot|shutdown → 202 DevicePower (the state before the action)
//	GET  /ssh_key/, GET /ssh_key/{sshKeyId}      → SshKeyResponse
//	GET  /product/{productId}/operating-systems  → []OptionDump
//
// The API is served at the root and again under /api/v2 (the real base path), so a client's BasePath may be either
// the server URL or the server URL plus /api/v2. Every request must carry a valid X-API-KEY header. Every 2xx and
// every JSON error is application/json; errors are {"code": N, "message": "..."} (the shape Hivelocity's own cloud
// controller manager parses), except the documented 429 body. Admin endpoints under /_sim/ (see AdminHandler) seed devices, read state and the request
// log, and inject faults.
//
// Time is read from the clock in Options and state is derived lazily from timestamps: a reload started at t is
// RELOADING with power OFF until t+ReloadPoweredOff, RELOADING with power ON (the installer runs) until
// t+ReloadPoweredOff+ReloadPoweredOn, then IN_USE with power ON. A test that steps a fake clock sees the new state
// on its next read, with no goroutines or sleeps involved. Only the slow_answers fault waits, on the clock when it
// can sleep (a fake clock's waiters are released by stepping it). All methods are safe for concurrent use.
package hivelocitysim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Errors returned by the in-process methods; each is wrapped with detail.
var (
	// ErrInvalidDevice is returned by Seed (and ParseDevices) for a device it cannot accept.
	ErrInvalidDevice = errors.New("hivelocitysim: invalid device")
	// ErrInvalidFault is returned by SetFault for a fault it cannot inject.
	ErrInvalidFault = errors.New("hivelocitysim: invalid fault")
	// ErrInvalidSetting is returned for an invalid time scale, rate limit, product or SSH key.
	ErrInvalidSetting = errors.New("hivelocitysim: invalid setting")
)

// Power states as the API reports them in powerStatus.
const (
	PowerOn  = "ON"
	PowerOff = "OFF"
)

// Provisioning (spsStatus) states the simulator moves devices through; the real API knows more (see DeviceDump).
const (
	StatusInUse     = "IN_USE"
	StatusReloading = "RELOADING"
	StatusFailed    = "FAILED"
)

// Durations are how long device processes take on the real system. The simulator divides each by the time scale.
type Durations struct {
	// ReloadPoweredOff is how long a reload keeps the device powered off before the installer boots.
	ReloadPoweredOff time.Duration
	// ReloadPoweredOn is how long the installer then runs, powered on, until the reload is done.
	ReloadPoweredOn time.Duration
	// Shutdown is how long a shutdown takes until the device reports OFF.
	Shutdown time.Duration
	// Boot is how long a boot takes until the device reports ON. A reboot takes Shutdown+Boot.
	Boot time.Duration
}

// DefaultDurations returns a 10-minute reload (2 minutes off, 8 on), a 1-minute shutdown and a 2-minute boot.
func DefaultDurations() Durations {
	return Durations{ReloadPoweredOff: 2 * time.Minute, ReloadPoweredOn: 8 * time.Minute, Shutdown: time.Minute, Boot: 2 * time.Minute}
}

// RateLimit is the request budget. Hivelocity documents (developers.hivelocity.net/docs/api-rate-limiting) a fixed
// one-hour window that begins with the first request, 3,600 authenticated and 200 unauthenticated requests per
// window, X-RateLimit-Limit/-Remaining/-Reset on every response (Reset: the seconds until the window ends), and 429
// with {"code": 429, "description": "Your IP is rate limited."} beyond the budget. Hivelocity keys the budget by
// client IP; the simulator keys it by API key (all requests without a valid key share one anonymous budget), which
// is the same thing for replicas that share a key behind one egress IP, and lets tests separate tenants.
type RateLimit struct {
	// Limit is the number of requests per Window for each valid API key; 0 disables rate limiting and its headers.
	Limit int
	// AnonymousLimit is the shared budget of requests without a valid key; 0 means Limit.
	AnonymousLimit int
	// Window is the length of a budget window, which starts with the first request after the previous one ended;
	// 0 means one hour.
	Window time.Duration
	// ResetUnix makes X-RateLimit-Reset the Unix time (seconds) of the window's end instead of the documented
	// number of seconds until it ends.
	ResetUnix bool
}

// DocumentedRateLimit returns Hivelocity's documented default budget.
func DocumentedRateLimit() RateLimit {
	return RateLimit{Limit: 3600, AnonymousLimit: 200, Window: time.Hour}
}

// Options configures a Simulator. The zero value is usable: real clock, time scale 1, DefaultDurations, no API key
// (every request is refused until SetAPIKeys), no rate limit, DefaultProducts, no SSH keys, logs discarded.
type Options struct {
	// Clock is the time source; nil means the real clock. Tests pass a k8s.io/utils/clock/testing fake clock. The
	// simulator only reads the time (state is derived from timestamps, no timers), so a PassiveClock suffices,
	// except for the waits of the slow_answers fault: they use the clock's NewTimer if it has one (clock.Clock),
	// else real time.
	Clock clock.PassiveClock
	// TimeScale divides every Durations value: 100 makes a 10-minute reload take 6 seconds. A value that is not
	// positive and finite means 1.
	TimeScale float64
	// Durations are the unscaled process durations. The zero value means DefaultDurations; otherwise each field is
	// used as given, and a zero field makes that step immediate.
	Durations Durations
	// APIKeys are the valid X-API-KEY values.
	APIKeys []string
	// RateLimit is the request budget; the zero value disables it.
	RateLimit RateLimit
	// Products is the catalogue; nil means DefaultProducts. Seeding a device of another product adds that product
	// with DefaultOperatingSystems.
	Products []Product
	// SSHKeys are the account's public SSH keys.
	SSHKeys []SSHKey
	// Logger receives request (debug) and admin (info) logs; nil discards them.
	Logger *slog.Logger
}

// Simulator is an in-process Hivelocity API. Build it with New, seed it, and serve Handler.
type Simulator struct {
	clock  clock.PassiveClock
	logger *slog.Logger

	// mu guards everything below. One lock serialises every request, so the request log order is the order in
	// which requests changed state.
	mu        sync.Mutex
	timeScale float64
	durations Durations
	keys      map[string]bool
	rate      RateLimit
	buckets   map[string]*bucket
	devices   map[int32]*DeviceState
	products  map[int32]Product
	sshKeys   map[int32]SSHKey
	faults    []*activeFault
	requests  []Request
	seq       int64
	journals  map[int32]*journal
}

// New returns a simulator with no devices. Products and SSH keys in opts are taken as given; SetProducts and
// SetSSHKeys validate theirs.
func New(opts Options) *Simulator {
	s := &Simulator{
		clock:     opts.Clock,
		logger:    opts.Logger,
		timeScale: opts.TimeScale,
		durations: opts.Durations,
		keys:      map[string]bool{},
		rate:      opts.RateLimit,
		buckets:   map[string]*bucket{},
		devices:   map[int32]*DeviceState{},
		products:  map[int32]Product{},
		sshKeys:   map[int32]SSHKey{},
		journals:  map[int32]*journal{},
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.timeScale <= 0 || math.IsNaN(s.timeScale) || math.IsInf(s.timeScale, 0) {
		s.timeScale = 1
	}
	if s.durations == (Durations{}) {
		s.durations = DefaultDurations()
	}
	if s.rate.Window <= 0 {
		s.rate.Window = time.Hour
	}
	for _, k := range opts.APIKeys {
		if k = strings.TrimSpace(k); k != "" {
			s.keys[k] = true
		}
	}
	products := opts.Products
	if products == nil {
		products = DefaultProducts()
	}
	for _, p := range products {
		s.products[p.ID] = p.clone()
	}
	for _, k := range opts.SSHKeys {
		s.sshKeys[k.ID] = k
	}
	return s
}

// Handler returns the HTTP handler: the API at the root and under /api/v2, and the admin endpoints under /_sim/.
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range apiRoutes() {
		h := func(w http.ResponseWriter, r *http.Request) { s.serveAPI(w, r, rt) }
		mux.HandleFunc(rt.method+" "+rt.pattern, h)
		mux.HandleFunc(rt.method+" "+apiBasePath+rt.pattern, h)
	}
	fallback := notFoundRoute()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.serveAPI(w, r, fallback) })
	mux.Handle(AdminPrefix, s.AdminHandler())
	return mux
}

// SetAPIKeys replaces the set of valid API keys (blank entries are ignored); requests with any other key get 401
// from then on. An empty set refuses every request.
func (s *Simulator) SetAPIKeys(keys ...string) {
	set := map[string]bool{}
	for _, k := range keys {
		if k = strings.TrimSpace(k); k != "" {
			set[k] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = set
}

// KeyID returns the identifier the request log uses for an API key: "key-" and the first 8 bytes of its SHA-256
// in hex, so logs can tell keys apart without holding them. The empty key has the empty ID.
func KeyID(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return "key-" + hex.EncodeToString(sum[:8])
}

// SetTimeScale changes the time scale. Processes already running keep the end times they were given; new ones use
// the new scale. It returns an error wrapping ErrInvalidSetting unless scale is positive and finite.
func (s *Simulator) SetTimeScale(scale float64) error {
	if scale <= 0 || math.IsNaN(scale) || math.IsInf(scale, 0) {
		return fmt.Errorf("%w: time scale %v must be positive and finite", ErrInvalidSetting, scale)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timeScale = scale
	return nil
}

// TimeScale returns the current time scale.
func (s *Simulator) TimeScale() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timeScale
}

// SetRateLimit replaces the request budget and starts every budget afresh. A zero Window means one hour. It
// returns an error wrapping ErrInvalidSetting for a negative limit or window.
func (s *Simulator) SetRateLimit(rl RateLimit) error {
	if rl.Limit < 0 || rl.AnonymousLimit < 0 || rl.Window < 0 {
		return fmt.Errorf("%w: negative rate limit %+v", ErrInvalidSetting, rl)
	}
	if rl.Window == 0 {
		rl.Window = time.Hour
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate = rl
	s.buckets = map[string]*bucket{}
	return nil
}

// SetSSHKeys adds the keys to the account, replacing keys with the same ID. It returns an error wrapping
// ErrInvalidSetting, and adds nothing, if a key has no positive ID or no name.
func (s *Simulator) SetSSHKeys(keys ...SSHKey) error {
	for _, k := range keys {
		if k.ID <= 0 || k.Name == "" {
			return fmt.Errorf("%w: ssh key %+v needs a positive id and a name", ErrInvalidSetting, k)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.sshKeys[k.ID] = k
	}
	return nil
}

// SetProducts adds the products to the catalogue, replacing products with the same ID. It returns an error
// wrapping ErrInvalidSetting, and adds nothing, if a product has no positive ID or offers no operating system.
func (s *Simulator) SetProducts(products ...Product) error {
	for _, p := range products {
		if p.ID <= 0 || len(p.OperatingSystems) == 0 {
			return fmt.Errorf("%w: product %d needs a positive id and at least one operating system", ErrInvalidSetting, p.ID)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range products {
		s.products[p.ID] = p.clone()
	}
	return nil
}

// Product is a device type of the catalogue and the operating systems it can be reloaded with.
type Product struct {
	ID               int32    `json:"productId"`
	Name             string   `json:"productName"`
	OperatingSystems []string `json:"operatingSystems"`
}

func (p Product) clone() Product {
	p.OperatingSystems = slices.Clone(p.OperatingSystems)
	return p
}

// offers reports whether the product can be reloaded with osName (exact match, as the real API requires).
func (p Product) offers(osName string) bool { return slices.Contains(p.OperatingSystems, osName) }

// SSHKey is one of the account's public SSH keys.
type SSHKey struct {
	ID        int32  `json:"sshKeyId"`
	Name      string `json:"name"`
	PublicKey string `json:"publicKey"`
}

// scaled divides a real-system duration by the time scale. Callers hold s.mu.
func (s *Simulator) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.timeScale)
}

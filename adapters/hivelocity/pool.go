package hivelocity

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Defaults the API fills in; the provisioner applies them too, for a spec stored before they existed.
const (
	DefaultOSName                  = "Ubuntu 22.04"
	DefaultReloadTimeoutPoweredOff = 10 * time.Minute
	DefaultReloadTimeoutPoweredOn  = 40 * time.Minute
	// DefaultMaxUnavailable and DefaultMaxSurge roll a spec change one device at a time on the pool's own
	// devices: bare metal has no spare capacity by default.
	DefaultMaxUnavailable = 1
	DefaultMaxSurge       = 0
	// DefaultMaxUnhealthy takes one device out at a time: a wipe is irreversible, and a burst of failures is
	// more likely a broken spec or a Hivelocity incident than broken machines.
	DefaultMaxUnhealthy = 1
)

// ErrInvalidSpec is wrapped by poolOf for a pool the provisioner cannot act on.
var ErrInvalidSpec = errors.New("invalid node pool spec")

// Pool is a node pool as the provisioner acts on it.
type Pool struct {
	ID, Name           string
	ClusterID, Cluster string // the cluster's id and name
	Domain             string // the cluster's base domain, or the provisioner's default
	Replicas           int
	Req                Requirements
	OSName             string
	SSHKeyName         string
	Userdata           string
	// OffTimeout and OnTimeout bound a reload: powered off (the installer has not booted) and powered on
	// (installing).
	OffTimeout, OnTimeout time.Duration
	// MaxUnavailable is how many of Replicas a roll or a replacement may take down at once; MaxSurge how many
	// devices beyond Replicas a roll may claim first; MaxUnhealthy how many devices may be in remediation at
	// once. All resolved against Replicas.
	MaxUnavailable, MaxSurge, MaxUnhealthy int
	// Spec is the hash of what a reload installs (OS, SSH key, user data): a device whose spec tag differs is
	// re-provisioned.
	Spec string
}

// poolOf reads a node pool and its cluster. defaultDomain names hosts of clusters without a base domain.
func poolOf(obj *adapter.Object, defaultDomain string) (Pool, error) {
	p := Pool{ID: obj.ID, Name: obj.Name, ClusterID: obj.ParentID, Domain: defaultDomain}
	if obj.Parent != nil {
		p.Cluster = obj.Parent.Name
		p.Domain = cmp.Or(baseDomainOf(obj.Parent.Spec), defaultDomain)
	}
	var spec api.NodePoolSpec
	if err := json.Unmarshal(obj.Spec, &spec); err != nil {
		return p, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	h := spec.Platform.Hivelocity
	p.Replicas = spec.Replicas
	p.Req = Requirements{DeviceType: h.DeviceType, Region: h.Region}
	if h.Selector != nil {
		p.Req.Selector = *h.Selector
	}
	p.OSName = cmp.Or(deref(h.OsName), DefaultOSName)
	p.SSHKeyName, p.Userdata = deref(h.SshKeyName), deref(h.Userdata)
	p.OffTimeout, p.OnTimeout = DefaultReloadTimeoutPoweredOff, DefaultReloadTimeoutPoweredOn
	if r := spec.Remediation; r != nil {
		var err error
		if p.OffTimeout, err = timeout(r.ReloadTimeoutPoweredOff, DefaultReloadTimeoutPoweredOff); err != nil {
			return p, fmt.Errorf("%w: remediation.reload_timeout_powered_off: %w", ErrInvalidSpec, err)
		}
		if p.OnTimeout, err = timeout(r.ReloadTimeoutPoweredOn, DefaultReloadTimeoutPoweredOn); err != nil {
			return p, fmt.Errorf("%w: remediation.reload_timeout_powered_on: %w", ErrInvalidSpec, err)
		}
	}
	if err := p.limits(spec); err != nil {
		return p, err
	}
	p.Spec = specHash(p.OSName, p.SSHKeyName, p.Userdata)
	switch {
	case p.Replicas < 0:
		return p, fmt.Errorf("%w: replicas %d is negative", ErrInvalidSpec, p.Replicas)
	case p.Req.DeviceType == "" || p.Req.Region == "":
		return p, fmt.Errorf("%w: platform.hivelocity needs device_type and region", ErrInvalidSpec)
	case p.Cluster == "" || p.ClusterID == "":
		return p, fmt.Errorf("%w: the pool's cluster is unknown", ErrInvalidSpec)
	case !hvclient.ValidHostname(p.Hostname(p.Replicas+p.MaxSurge, 0)):
		return p, fmt.Errorf("%w: %q is not a valid host name", ErrInvalidSpec, p.Hostname(p.Replicas+p.MaxSurge, 0))
	}
	return p, nil
}

// limits resolves max_unavailable, max_surge and remediation.max_unhealthy against the replicas as Kubernetes
// resolves a Deployment's and a MachineHealthCheck's: unavailable rounds down but is at least 1 when the surge
// comes to 0, surge rounds up, unhealthy rounds down but is at least 1 (a number 0 remediates none).
func (p *Pool) limits(spec api.NodePoolSpec) error {
	var unhealthy json.Marshaler
	if spec.Remediation != nil && spec.Remediation.MaxUnhealthy != nil {
		unhealthy = spec.Remediation.MaxUnhealthy
	}
	var surge, unavailable json.Marshaler
	if spec.MaxSurge != nil {
		surge = spec.MaxSurge
	}
	if spec.MaxUnavailable != nil {
		unavailable = spec.MaxUnavailable
	}
	var err error
	if p.MaxSurge, _, err = scaled(surge, p.Replicas, DefaultMaxSurge, true); err != nil {
		return fmt.Errorf("%w: max_surge: %w", ErrInvalidSpec, err)
	}
	var percent bool
	if p.MaxUnavailable, percent, err = scaled(unavailable, p.Replicas, DefaultMaxUnavailable, false); err != nil {
		return fmt.Errorf("%w: max_unavailable: %w", ErrInvalidSpec, err)
	}
	if p.MaxSurge == 0 && p.MaxUnavailable == 0 {
		if !percent {
			return fmt.Errorf("%w: max_unavailable and max_surge cannot both be 0", ErrInvalidSpec)
		}
		p.MaxUnavailable = 1
	}
	if p.MaxUnhealthy, percent, err = scaled(unhealthy, p.Replicas, DefaultMaxUnhealthy, false); err != nil {
		return fmt.Errorf("%w: remediation.max_unhealthy: %w", ErrInvalidSpec, err)
	}
	if percent {
		p.MaxUnhealthy = max(p.MaxUnhealthy, 1)
	}
	return nil
}

// scaled reads an integer-or-percentage field (nil: def) and resolves a percentage of replicas, rounding up or
// down; percent says whether it was one.
func scaled(v json.Marshaler, replicas, def int, up bool) (n int, percent bool, err error) {
	if v == nil {
		return def, false, nil
	}
	raw, err := v.MarshalJSON()
	if err != nil {
		return 0, false, err
	}
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 0 {
			return 0, false, fmt.Errorf("%d is negative", n)
		}
		return n, false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, false, fmt.Errorf("%s is neither a number nor a percentage", raw)
	}
	pct, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if !strings.HasSuffix(s, "%") || err != nil || pct < 0 || pct > 100 {
		return 0, false, fmt.Errorf("%q is not a percentage from 0%% to 100%%", s)
	}
	if up {
		return (pct*replicas + 99) / 100, true, nil
	}
	return pct * replicas / 100, true, nil
}

func baseDomainOf(clusterSpec json.RawMessage) string {
	var spec struct {
		HostedCluster *struct {
			DNS *struct {
				BaseDomain string `json:"base_domain"`
			} `json:"dns"`
		} `json:"hosted_cluster"`
	}
	if json.Unmarshal(clusterSpec, &spec) != nil || spec.HostedCluster == nil || spec.HostedCluster.DNS == nil {
		return ""
	}
	return strings.TrimSuffix(spec.HostedCluster.DNS.BaseDomain, ".")
}

func timeout(v *string, def time.Duration) (time.Duration, error) {
	if v == nil || *v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(*v)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s is not positive", *v)
	}
	return d, nil
}

// Hostname is the FQDN of the device in slot at the slot's generation gen: <pool>-<slot>.<cluster>.<domain> for the
// first, <pool>-<slot>-g<gen>.<cluster>.<domain> for each replacement of a device taken out (see KeyGen), so that a
// replacement never inherits the name, and with it the node and certificates, of the machine it replaces.
func (p Pool) Hostname(slot, gen int) string {
	host := p.Name + "-" + strconv.Itoa(slot)
	if gen > 0 {
		host += "-g" + strconv.Itoa(gen)
	}
	return host + "." + p.Cluster + "." + p.Domain
}

// specHash is a short hash of what a reload installs; the fields are length-prefixed so that no two specs
// collide by moving text from one field to the next.
func specHash(osName, sshKey, userdata string) string {
	h := sha256.New()
	for _, f := range []string{osName, sshKey, userdata} {
		_, _ = fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// resolveOS returns the name a product offers for the operating system the pool asks for: the same name (case
// aside), or else the product's ".x" name of that distribution and major version — Hivelocity names images
// "Ubuntu 22.x", where a pool may say "Ubuntu 22.04". ok is false when the product offers neither.
func resolveOS(want string, offered []string) (string, bool) {
	for _, o := range offered {
		if strings.EqualFold(strings.TrimSpace(o), strings.TrimSpace(want)) {
			return o, true
		}
	}
	distro, major, ok := splitOS(want)
	if !ok {
		return "", false
	}
	for _, o := range offered {
		d, m, ok := splitOS(o)
		if ok && strings.EqualFold(d, distro) && m == major && strings.HasSuffix(strings.ToLower(o), ".x") {
			return o, true
		}
	}
	return "", false
}

// splitOS splits "Ubuntu 22.04" into ("Ubuntu", "22"): the words before the last, and the last word's part before
// its first dot, which must be a number.
func splitOS(name string) (distro, major string, ok bool) {
	fields := strings.Fields(name)
	if len(fields) < 2 {
		return "", "", false
	}
	version := fields[len(fields)-1]
	major, _, _ = strings.Cut(version, ".")
	if _, err := strconv.Atoi(major); err != nil {
		return "", "", false
	}
	return strings.Join(fields[:len(fields)-1], " "), major, true
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

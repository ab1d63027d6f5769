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
	p.Spec = specHash(p.OSName, p.SSHKeyName, p.Userdata)
	switch {
	case p.Replicas < 0:
		return p, fmt.Errorf("%w: replicas %d is negative", ErrInvalidSpec, p.Replicas)
	case p.Req.DeviceType == "" || p.Req.Region == "":
		return p, fmt.Errorf("%w: platform.hivelocity needs device_type and region", ErrInvalidSpec)
	case p.Cluster == "" || p.ClusterID == "":
		return p, fmt.Errorf("%w: the pool's cluster is unknown", ErrInvalidSpec)
	case !hvclient.ValidHostname(p.Hostname(p.Replicas)):
		return p, fmt.Errorf("%w: %q is not a valid host name", ErrInvalidSpec, p.Hostname(p.Replicas))
	}
	return p, nil
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

// Hostname is the FQDN of the device in slot: <pool>-<slot>.<cluster>.<domain>.
func (p Pool) Hostname(slot int) string {
	return p.Name + "-" + strconv.Itoa(slot) + "." + p.Cluster + "." + p.Domain
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

package hivelocity

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

// Tags an operator puts on a device (the CAPHV convention, so that one fleet serves both): a device is eligible
// only with TagUseAllow and the pool's device type and selector labels. TagPermanentError is written by the
// provisioner when it gives up on a device, and removed by the operator once the device is fixed.
const (
	// TagUseAllow lets provisioners claim the device.
	TagUseAllow = "caphv-use=allow"
	// LabelPrefix prefixes operator labels: caphvlabel:<key>=<value>.
	LabelPrefix = "caphvlabel:"
	// LabelDeviceType is the label matched against the pool's device_type.
	LabelDeviceType = "deviceType"
	// KeyPermanentError marks a device no provisioner may use: caphv-permanent-error=<why>.
	KeyPermanentError = "caphv-permanent-error"
)

// Keys of the tags CAPHV writes on devices it owns: such a device is never eligible here.
const (
	keyCAPHVCluster = "caphv-cluster-name"
	keyCAPHVMachine = "caphv-machine-name"
)

// The provisioner's own tags, key=value. They are the only record of what a pool owns: nothing else survives a
// restart. Every one of them starts with TagPrefix, and releasing a device removes exactly those.
const (
	// TagPrefix starts every tag the provisioner writes; a device with any such tag is owned.
	TagPrefix = "hyperfleet-"
	// KeyCluster is the owning cluster's id.
	KeyCluster = TagPrefix + "cluster"
	// KeyNodePool is the owning node pool's id.
	KeyNodePool = TagPrefix + "nodepool"
	// KeySlot is the device's slot in its pool (its hostname is <pool>-<slot>.<cluster>.<domain>).
	KeySlot = TagPrefix + "slot"
	// KeyClaim is the claim: <unix milliseconds>-<random nonce>, written by the claim and kept after it.
	KeyClaim = TagPrefix + "claim"
	// KeySpec is the hash of the spec (OS, SSH key, user data) the device was last reloaded with; absent while
	// the device is only claimed.
	KeySpec = TagPrefix + "spec"
	// KeyReload is the Unix second the device's last reload by the provisioner started.
	KeyReload = TagPrefix + "reload"
	// KeyRelease is the Unix second the release (the wipe reload) of the device started.
	KeyRelease = TagPrefix + "release"
	// KeyRemediate marks a device being taken out (powered off, wiped, then marked KeyPermanentError); its value
	// is the permanent-error value to write.
	KeyRemediate = TagPrefix + "remediate"
	// KeyGen is the slot's generation: how many devices of the slot were taken out before this one (absent: 0).
	// It names the host (see Pool.Hostname) and survives restarts as every tag does.
	KeyGen = TagPrefix + "gen"
)

// Claim is the value of the claim tag: when the claim was made, by the claimer's clock, and a nonce no other
// claim shares.
type Claim struct {
	At    time.Time
	Nonce string
}

// Equal reports whether c and o are the same claim (as written and as read back).
func (c Claim) Equal(o Claim) bool { return c.Nonce == o.Nonce && c.At.UnixMilli() == o.At.UnixMilli() }

// String is the tag value, <unix ms>-<nonce>.
func (c Claim) String() string { return strconv.FormatInt(c.At.UnixMilli(), 10) + "-" + c.Nonce }

func parseClaim(v string) (Claim, bool) {
	ms, nonce, ok := strings.Cut(v, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || nonce == "" {
		return Claim{}, false
	}
	return Claim{At: time.UnixMilli(n).UTC(), Nonce: nonce}, true
}

// Ownership is what the provisioner's tags on a device say.
type Ownership struct {
	Cluster, NodePool string
	Slot              int // -1 when the tag is missing or malformed
	Claim             Claim
	Spec              string
	ReloadAt          time.Time // zero: never reloaded by the provisioner
	ReleaseAt         time.Time // zero: not being released
	Remediate         string    // the permanent-error value of a device being taken out; empty: none
	Gen               int       // the slot's generation
}

// ownershipOf reads the provisioner's tags; ok is false when the device has none.
func ownershipOf(tags []string) (Ownership, bool) {
	o := Ownership{Slot: -1}
	owned := false
	for _, t := range tags {
		if !strings.HasPrefix(t, TagPrefix) {
			continue
		}
		owned = true
		k, v, _ := strings.Cut(t, "=")
		switch k {
		case KeyCluster:
			o.Cluster = v
		case KeyNodePool:
			o.NodePool = v
		case KeySlot:
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				o.Slot = n
			}
		case KeyClaim:
			o.Claim, _ = parseClaim(v)
		case KeySpec:
			o.Spec = v
		case KeyReload:
			o.ReloadAt = unixTag(v)
		case KeyRelease:
			o.ReleaseAt = unixTag(v)
		case KeyRemediate:
			o.Remediate = v
		case KeyGen:
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				o.Gen = n
			}
		}
	}
	return o, owned
}

func unixTag(v string) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// tags returns o as tags, in a fixed order, leaving out what o does not set.
func (o Ownership) tags() []string {
	out := []string{KeyCluster + "=" + o.Cluster, KeyNodePool + "=" + o.NodePool}
	if o.Slot >= 0 {
		out = append(out, KeySlot+"="+strconv.Itoa(o.Slot))
	}
	if o.Claim.Nonce != "" {
		out = append(out, KeyClaim+"="+o.Claim.String())
	}
	if o.Spec != "" {
		out = append(out, KeySpec+"="+o.Spec)
	}
	if !o.ReloadAt.IsZero() {
		out = append(out, KeyReload+"="+strconv.FormatInt(o.ReloadAt.Unix(), 10))
	}
	if !o.ReleaseAt.IsZero() {
		out = append(out, KeyRelease+"="+strconv.FormatInt(o.ReleaseAt.Unix(), 10))
	}
	if o.Remediate != "" {
		out = append(out, KeyRemediate+"="+o.Remediate)
	}
	if o.Gen > 0 {
		out = append(out, KeyGen+"="+strconv.Itoa(o.Gen))
	}
	return out
}

// operatorTags returns tags without the provisioner's: what a released device keeps.
func operatorTags(tags []string) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if !strings.HasPrefix(t, TagPrefix) {
			out = append(out, t)
		}
	}
	return out
}

// withOwnership returns the operator's tags of a device followed by o's: the whole list a write must send, since
// the API replaces the list.
func withOwnership(tags []string, o Ownership) []string {
	return append(operatorTags(tags), o.tags()...)
}

// permanentError returns the tags of a device the provisioner gives up on: the operator's, without any earlier
// permanent-error tag, and caphv-permanent-error=<why>.
func permanentError(tags []string, why string) []string {
	out := slices.DeleteFunc(operatorTags(tags), func(t string) bool { return strings.HasPrefix(t, KeyPermanentError+"=") })
	return append(out, KeyPermanentError+"="+why)
}

// Requirements are what a device must carry and where it must be to serve a pool.
type Requirements struct {
	DeviceType string
	Region     string
	Selector   map[string]string
}

// SkipReason says why a device cannot serve a pool; the empty reason means it can.
type SkipReason string

// Skip reasons, in the order eligibility checks them: a device is counted under the first that applies.
const (
	SkipNotAllowed     SkipReason = "not_allowed"     // no caphv-use=allow
	SkipDeviceType     SkipReason = "device_type"     // another or no caphvlabel:deviceType
	SkipSelector       SkipReason = "selector"        // a selector label missing or different
	SkipRegion         SkipReason = "region"          // another location
	SkipPermanentError SkipReason = "permanent_error" // caphv-permanent-error
	SkipOwned          SkipReason = "owned"           // another pool's (or CAPHV's) device
	SkipOSNotOffered   SkipReason = "os_not_offered"  // its product does not offer the pool's OS
)

// SkipReasons returns every reason, in check order.
func SkipReasons() []SkipReason {
	return []SkipReason{SkipNotAllowed, SkipDeviceType, SkipSelector, SkipRegion, SkipPermanentError, SkipOwned, SkipOSNotOffered}
}

// eligibility returns why d cannot serve a pool with requirements req, or "" if it can (its OS offer aside).
func eligibility(d hvclient.Device, req Requirements) SkipReason {
	labels, allowed, permanent, owned := map[string]string{}, false, false, false
	for _, t := range d.Tags {
		k, v, _ := strings.Cut(t, "=")
		switch {
		case t == TagUseAllow:
			allowed = true
		case strings.HasPrefix(k, LabelPrefix):
			labels[strings.TrimPrefix(k, LabelPrefix)] = v
		case k == KeyPermanentError:
			permanent = true
		case strings.HasPrefix(t, TagPrefix), k == keyCAPHVCluster, k == keyCAPHVMachine:
			owned = true
		}
	}
	if !allowed {
		return SkipNotAllowed
	}
	if dt, ok := labels[LabelDeviceType]; !ok || dt != req.DeviceType {
		return SkipDeviceType
	}
	for k, v := range req.Selector {
		if got, ok := labels[k]; !ok || got != v {
			return SkipSelector
		}
	}
	if !strings.EqualFold(d.Location, req.Region) {
		return SkipRegion
	}
	if permanent {
		return SkipPermanentError
	}
	if owned {
		return SkipOwned
	}
	return ""
}

// skipSummary renders skip counts as "3 in another region, 2 owned", in check order, leaving out zero counts.
func skipSummary(skips map[SkipReason]int) string {
	words := map[SkipReason]string{
		SkipNotAllowed: "without " + TagUseAllow, SkipDeviceType: "of another device type", SkipSelector: "not matching the selector",
		SkipRegion: "in another region", SkipPermanentError: "marked " + KeyPermanentError, SkipOwned: "owned by another pool",
		SkipOSNotOffered: "whose product does not offer the OS",
	}
	var parts []string
	for _, r := range SkipReasons() {
		if n := skips[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, words[r]))
		}
	}
	if len(parts) == 0 {
		return "none skipped"
	}
	return strings.Join(parts, ", ")
}

// rendezvous orders candidate devices for a pool by a hash of the pool and the device: every replica working on
// a pool prefers the same devices (so that they compete for one device, which the claim protocol settles, rather
// than each claim a different one), while different pools prefer different devices.
func rendezvous(poolID string, devices []hvclient.Device) []hvclient.Device {
	out := slices.Clone(devices)
	score := func(id int32) uint64 {
		h := uint64(14695981039346656037) // FNV-1a
		for _, b := range []byte(poolID + "/" + strconv.Itoa(int(id))) {
			h ^= uint64(b)
			h *= 1099511628211
		}
		return h
	}
	slices.SortFunc(out, func(a, b hvclient.Device) int {
		return cmp.Or(cmp.Compare(score(a.ID), score(b.ID)), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// changedSince says how a device's fresh status differs from the ownership a pass acted on, or "" when it does
// not: another owner or slot, another claim, another reload or release, or a reload that started although the
// pass saw none running (reloading false). Every tag write and reload stops on such a change: it was decided on
// what is no longer so.
func changedSince(acted Ownership, reloading bool, st hvclient.Status) string {
	got, _ := ownershipOf(st.Tags)
	switch {
	case got.NodePool != acted.NodePool || got.Cluster != acted.Cluster || got.Slot != acted.Slot:
		return "changed owner"
	case !got.Claim.Equal(acted.Claim):
		return "was claimed again"
	case got.Spec != acted.Spec || !got.ReloadAt.Equal(acted.ReloadAt) || !got.ReleaseAt.Equal(acted.ReleaseAt):
		return "was reloaded since"
	case st.Reloading && !reloading:
		return "started reloading"
	}
	return ""
}

// rebase applies the change from base (the tags a write was computed from) to want onto fresh (the tags a fresh
// read shows): what want drops from base is dropped, what it adds is added, and whatever else changed in fresh
// (an operator's label) stays.
func rebase(base, want, fresh []string) []string {
	inBase, inWant := map[string]bool{}, map[string]bool{}
	for _, t := range base {
		inBase[t] = true
	}
	for _, t := range want {
		inWant[t] = true
	}
	out := make([]string, 0, len(fresh)+len(want))
	seen := map[string]bool{}
	for _, t := range fresh {
		if (inBase[t] && !inWant[t]) || seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	for _, t := range want {
		if !inBase[t] && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

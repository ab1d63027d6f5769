package hivelocitysim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Tags operators put on devices that CAPHV-style provisioners may use (see the CAPHV book, "Provisioning
// Machines").
const (
	// TagUseAllow marks a device a provisioner may claim.
	TagUseAllow = "caphv-use=allow"
	// TagDeviceTypePrefix prefixes the device-type label: caphvlabel:deviceType=<type>.
	TagDeviceTypePrefix = "caphvlabel:deviceType="
)

// Demo fleet products and device types.
const (
	DemoProductControlPlane int32 = 504
	DemoProductWorker       int32 = 576
	DemoTypeControlPlane          = "hvControlPlane"
	DemoTypeWorker                = "hvWorker"
)

// DefaultOperatingSystems returns the operating systems every default product offers.
func DefaultOperatingSystems() []string {
	return []string{"Ubuntu 20.x", "Ubuntu 22.x", "Ubuntu 24.x", "Debian 12.x", "Rocky Linux 9.x", "Flatcar Linux"}
}

// DefaultProducts returns the catalogue of a new simulator: the demo fleet's two products.
func DefaultProducts() []Product {
	return []Product{
		{ID: DemoProductControlPlane, Name: "Instant Dedicated E3-1230 v6 32GB", OperatingSystems: DefaultOperatingSystems()},
		{ID: DemoProductWorker, Name: "Instant Dedicated E-2288G 64GB", OperatingSystems: DefaultOperatingSystems()},
	}
}

// DemoSSHKeys returns the demo account's SSH key.
func DemoSSHKeys() []SSHKey {
	return []SSHKey{{ID: 1, Name: "hyperfleet-dev", PublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHyperfleetDevKeyForTheSimulatorOnly hyperfleet-dev"}}
}

// DemoDevices returns a dozen spare devices as an operator would tag them for a provisioner: six in LAX2 and six
// in NYC1, each region with two control-plane devices (product 504, deviceType hvControlPlane) and four workers
// (product 576, deviceType hvWorker), all powered on with Ubuntu 20.x and tagged caphv-use=allow.
func DemoDevices() []Device {
	var out []Device
	regions := []struct {
		name    string
		firstID int32
		subnet  string
	}{{"LAX2", 1001, "192.0.2."}, {"NYC1", 2001, "198.51.100."}}
	for _, r := range regions {
		for i := range int32(6) {
			product, deviceType := DemoProductWorker, DemoTypeWorker
			if i < 2 {
				product, deviceType = DemoProductControlPlane, DemoTypeControlPlane
			}
			id := r.firstID + i
			out = append(out, Device{
				ID:           id,
				Hostname:     fmt.Sprintf("%s-%d.spare.hivelocity.example", strings.ToLower(r.name), id),
				LocationName: r.name,
				ProductID:    product,
				PrimaryIP:    fmt.Sprintf("%s%d", r.subnet, 10+i),
				OSName:       "Ubuntu 20.x",
				PowerStatus:  PowerOn,
				SPSStatus:    StatusInUse,
				Tags:         []string{TagUseAllow, TagDeviceTypePrefix + deviceType},
				ServiceID:    50000 + id,
				OrderID:      70000 + id,
			})
		}
	}
	return out
}

// ParseDevices reads a JSON list of devices (a seed file). It returns an error wrapping ErrInvalidDevice if the
// data is not such a list, holds an unknown field, or a device fails Seed's checks.
func ParseDevices(data []byte) ([]Device, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var devices []Device
	if err := dec.Decode(&devices); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDevice, err)
	}
	for i := range devices {
		if err := devices[i].validate(); err != nil {
			return nil, err
		}
	}
	return devices, nil
}

// ParseAPIKeys reads API keys, one per line; blank lines and lines starting with # are skipped and surrounding
// space is trimmed.
func ParseAPIKeys(data []byte) []string {
	var keys []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	return keys
}

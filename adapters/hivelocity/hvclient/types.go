// Package hvclient is the Hivelocity provisioner's client of the Hivelocity API v2, built on the official client
// github.com/hivelocity/hivelocity-client-go (v0.2.0). It narrows the API to the calls the provisioner makes,
// turns every failure into one of a few sentinel errors, reads the API key from a file that may be rotated, and
// keeps every caller of one Client under one request budget: a token bucket, and a pause of all calls after a 429
// until the X-RateLimit-Reset the API sent.
package hvclient

// Power states as the API reports them.
const (
	PowerOn  = "ON"
	PowerOff = "OFF"
)

// ProvisioningFailed is the spsStatus of a device whose last reload failed.
const ProvisioningFailed = "FAILED"

// Device is a bare-metal device as the device list (GET /bare-metal-devices/) and GET /bare-metal-devices/{id}
// show it. The list does not say whether a reload runs: Status does.
type Device struct {
	ID          int32
	Hostname    string
	Location    string // the facility code, e.g. LAX2
	ProductID   int32
	ProductName string
	PrimaryIP   string
	Power       string // PowerOn, PowerOff, or another value the API may report
	OSName      string
	Tags        []string
}

// Status is a device's provisioning state as GET /device/{id} shows it: the only call that tells whether a reload
// runs.
type Status struct {
	ID        int32
	Power     string
	Reloading bool   // isReload
	SPSStatus string // e.g. IN_USE, RELOADING, FAILED
	Location  string
	Tags      []string
}

// Reload is what a reload (PUT /bare-metal-devices/{id}) asks for. Tags replace the device's tags.
type Reload struct {
	OSName   string
	Hostname string // must be a fully qualified domain name
	Script   string // cloud-init user data or a post-install script
	SSHKeyID int32  // 0: none
	Tags     []string
	// SkipPowerCheck reloads a device that is still powered on (the API otherwise refuses).
	SkipPowerCheck bool
}

// PowerAction is an action of POST /device/{id}/power.
type PowerAction string

// Power actions.
const (
	PowerBoot     PowerAction = "boot"
	PowerShutdown PowerAction = "shutdown"
	PowerReboot   PowerAction = "reboot"
)

// SSHKey is one of the account's public SSH keys.
type SSHKey struct {
	ID   int32
	Name string
}

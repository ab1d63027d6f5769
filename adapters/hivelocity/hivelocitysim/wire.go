package hivelocitysim

import (
	"hash/fnv"
	"strconv"
)

// The JSON shapes of the API, as the official client's models (package swagger of hivelocity-client-go v0.2.0)
// name them. They are written out rather than imported so that every field is sent, as the real API does (the
// client's models omit zero values such as "isReload": false); wire_test.go decodes each into the client's model
// with unknown fields refused, so a key the client does not know fails the build's tests.

// bareMetalDevice is BareMetalDevice.
type bareMetalDevice struct {
	DeviceID                 int32    `json:"deviceId"`
	Hostname                 string   `json:"hostname"`
	LocationName             string   `json:"locationName"`
	ProductID                int32    `json:"productId"`
	ProductName              string   `json:"productName"`
	PrimaryIP                string   `json:"primaryIp"`
	PowerStatus              string   `json:"powerStatus"`
	OSName                   string   `json:"osName"`
	Tags                     []string `json:"tags"`
	Script                   string   `json:"script"`
	PublicSSHKeyID           int32    `json:"publicSshKeyId"`
	ServiceID                int32    `json:"serviceId"`
	OrderID                  int32    `json:"orderId"`
	VlanID                   int32    `json:"vlanId"`
	Period                   string   `json:"period"`
	CustomIPXEScriptURL      string   `json:"customIPXEScriptURL"`
	CustomIPXEScriptContents string   `json:"customIPXEScriptContents"`
}

func (d bareMetalDevice) clone() bareMetalDevice {
	d.Tags = cloneTags(d.Tags)
	return d
}

func toBareMetalDevice(d *DeviceState) bareMetalDevice {
	return bareMetalDevice{
		DeviceID:       d.ID,
		Hostname:       d.Hostname,
		LocationName:   d.LocationName,
		ProductID:      d.ProductID,
		ProductName:    d.ProductName,
		PrimaryIP:      d.PrimaryIP,
		PowerStatus:    d.PowerStatus,
		OSName:         d.OSName,
		Tags:           cloneTags(d.Tags),
		Script:         d.Script,
		PublicSSHKeyID: d.PublicSSHKeyID,
		ServiceID:      d.ServiceID,
		OrderID:        d.OrderID,
		Period:         "monthly",
	}
}

// location is the object in DeviceDump.location (an untyped object in the client).
type location struct {
	FacilityCode string `json:"facilityCode"`
}

// deviceDump is DeviceDump, the answer of GET /device/{id}; isReload and spsStatus live only here.
type deviceDump struct {
	DeviceID           int32          `json:"deviceId"`
	Name               string         `json:"name"`
	Status             string         `json:"status"`
	DeviceType         string         `json:"deviceType"`
	DeviceTypeGroup    string         `json:"deviceTypeGroup"`
	PowerStatus        string         `json:"powerStatus"`
	HasCancellation    bool           `json:"hasCancellation"`
	BillingStatus      string         `json:"billingStatus"`
	IsManaged          bool           `json:"isManaged"`
	IsReload           bool           `json:"isReload"`
	MonitorsUp         int32          `json:"monitorsUp"`
	MonitorsTotal      int32          `json:"monitorsTotal"`
	ManagedAlertsTotal int32          `json:"managedAlertsTotal"`
	Ports              []any          `json:"ports"`
	Hostname           string         `json:"hostname"`
	IpmiEnabled        bool           `json:"ipmiEnabled"`
	DisplayedTags      []any          `json:"displayedTags"`
	Tags               []string       `json:"tags"`
	Location           location       `json:"location"`
	PrimaryIP          string         `json:"primaryIp"`
	ServiceMonitors    []string       `json:"serviceMonitors"`
	ServicePlan        int32          `json:"servicePlan"`
	SelfProvisioning   bool           `json:"selfProvisioning"`
	Metadata           map[string]any `json:"metadata"`
	SpsStatus          string         `json:"spsStatus"`
}

func toDeviceDump(d *DeviceState) deviceDump {
	return deviceDump{
		DeviceID:         d.ID,
		Name:             d.Hostname,
		Status:           "active",
		DeviceType:       d.ProductName,
		DeviceTypeGroup:  "Dedicated Server",
		PowerStatus:      d.PowerStatus,
		BillingStatus:    "active",
		IsReload:         d.IsReload,
		Ports:            []any{},
		Hostname:         d.Hostname,
		IpmiEnabled:      true,
		DisplayedTags:    []any{},
		Tags:             cloneTags(d.Tags),
		Location:         location{FacilityCode: d.LocationName},
		PrimaryIP:        d.PrimaryIP,
		ServiceMonitors:  []string{},
		ServicePlan:      d.ServiceID,
		SelfProvisioning: true,
		Metadata:         map[string]any{},
		SpsStatus:        d.SPSStatus,
	}
}

// deviceTag is DeviceTag, the body and answer of PUT /device/{id}/tags. The client omits an empty list, so a
// missing "tags" is an empty list: the only way the client can clear a device's tags.
type deviceTag struct {
	Tags []string `json:"tags"`
}

// devicePower is DevicePower.
type devicePower struct {
	PowerStatus string `json:"powerStatus"`
}

// sshKeyResponse is SshKeyResponse.
type sshKeyResponse struct {
	SSHKeyID  int32  `json:"sshKeyId"`
	Name      string `json:"name"`
	PublicKey string `json:"publicKey"`
}

// optionDump is OptionDump, one operating system a product offers.
type optionDump struct {
	ID           int32    `json:"id"`
	Name         string   `json:"name"`
	MonthlyPrice float32  `json:"monthlyPrice"`
	Currency     string   `json:"currency"`
	Expressions  []string `json:"expressions"`
	Tags         []string `json:"tags"`
}

// osOptionID gives an operating system the same option id in every product, as the real catalogue does.
func osOptionID(name string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int32(h.Sum32()%900000) + 100000
}

func toOptionDumps(p Product) []optionDump {
	out := make([]optionDump, 0, len(p.OperatingSystems))
	for _, name := range p.OperatingSystems {
		out = append(out, optionDump{ID: osOptionID(name), Name: name, Currency: "USD", Expressions: []string{}, Tags: []string{}})
	}
	return out
}

// bareMetalDeviceUpdate is BareMetalDeviceUpdate, the body of PUT /bare-metal-devices/{id}. As with deviceTag, a
// missing "tags" is an empty list, and the tags replace the device's.
type bareMetalDeviceUpdate struct {
	ForceReload              bool     `json:"forceReload"`
	OSName                   string   `json:"osName"`
	Hostname                 string   `json:"hostname"`
	CustomIPXEScriptContents string   `json:"customIPXEScriptContents"`
	Tags                     []string `json:"tags"`
	IgnitionID               int32    `json:"ignitionId"`
	PublicSSHKeyID           int32    `json:"publicSshKeyId"`
	Script                   string   `json:"script"`
	CustomIPXEScriptURL      string   `json:"customIPXEScriptURL"`
}

// changes reports whether the update asks for anything a reload would write, compared with d's current state; a
// PUT that changes nothing reloads only with forceReload, as the API documents the flag.
func (u bareMetalDeviceUpdate) changes(d *DeviceState) bool {
	return u.OSName != d.OSName || u.Hostname != d.Hostname || u.Script != d.Script ||
		u.PublicSSHKeyID != d.PublicSSHKeyID || u.IgnitionID != 0 ||
		u.CustomIPXEScriptContents != "" || u.CustomIPXEScriptURL != ""
}

// apiError is the JSON error body of the API.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// rateLimitedBody is the documented 429 body.
type rateLimitedBody struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

// RateLimitedDescription is the description of the documented 429 body.
const RateLimitedDescription = "Your IP is rate limited."

// proxyErrorPage is the HTML page of a server_error fault, as an nginx proxy in front of the API serves it.
func proxyErrorPage(status int, text string) []byte {
	title := strconv.Itoa(status) + " " + text
	return []byte("<html>\r\n<head><title>" + title + "</title></head>\r\n<body>\r\n<center><h1>" + title +
		"</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
}

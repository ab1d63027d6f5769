package hvclient

import "strings"

// ValidHostname reports whether h is a hostname a reload accepts: a fully qualified domain name of at least two
// DNS labels (letters, digits and inner dashes, 1–63 characters each), at most 253 characters, without a trailing
// dot. The trailing dot is refused because a reload's hostname becomes the device's host name, which is never
// written with one (RFC 1123 host names; systemd's hostnamectl refuses it), and because HyperFleet's base domains
// cannot end in one (ClusterSpec's pattern), so the provisioner never sends one. The provisioner checks hostnames
// with it before a reload, and hivelocitysim answers as the API does with it.
func ValidHostname(h string) bool {
	labels := strings.Split(h, ".")
	if len(h) > 253 || len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if r != '-' && (r < '0' || r > '9') && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
				return false
			}
		}
	}
	return true
}

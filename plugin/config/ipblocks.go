package config

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Ranges wider than these (fewer prefix bits) are warned about: a /16 is a whole IPv4 pod or node
// network of a typical cluster, a /48 a whole IPv6 site.
const (
	wideIPv4Bits = 16
	wideIPv6Bits = 48
)

// parseIPBlock reads an ipBlocks entry as istiod converts it for ztunnel: a CIDR range if it holds
// a '/', else a single address, a range of one (istio/istio
// pilot/pkg/serviceregistry/ambient/authorization.go, stringToIP). That conversion skips an entry
// it cannot parse, and a rule left with no source would admit every caller, so validation must
// refuse every entry this does not read.
func parseIPBlock(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		addr, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if addr.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("an address with a zone (%%%s) names no range", addr.Zone())
		}
		return netip.PrefixFrom(addr, addr.BitLen()), nil
	}
	return netip.ParsePrefix(s)
}

// validateIPBlock refuses what is not a range, a range with host bits set (the admin may think
// it narrower than it is) and a /0, which admits every address past the waypoint.
func validateIPBlock(path *field.Path, s string) field.ErrorList {
	p, err := parseIPBlock(s)
	if err != nil {
		return field.ErrorList{field.Invalid(path, s, "must be a CIDR range such as 10.8.0.0/16 or a single address such as 10.8.3.4 ("+err.Error()+")")}
	}
	if p.Bits() == 0 {
		return field.ErrorList{field.Invalid(path, s,
			"a /0 admits every address, in or out of the mesh, straight to every pod past the waypoint, which is no policy at all; name the scraper's own addresses")}
	}
	if m := p.Masked(); m != p {
		return field.ErrorList{field.Invalid(path, s, fmt.Sprintf("has bits set past the prefix length; the range it means is %s: write that", m))}
	}
	return nil
}

// wideIPBlock says whether s, a valid entry, is wider than a /16 (IPv4) or a /48 (IPv6).
func wideIPBlock(s string) bool {
	p, err := parseIPBlock(s)
	if err != nil {
		return false
	}
	if p.Addr().Is4() {
		return p.Bits() < wideIPv4Bits
	}
	return p.Bits() < wideIPv6Bits
}

package v1alpha1

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Ranges wider than these (fewer prefix bits) are warned about: a /16 is a whole IPv4 pod or node
// network of a typical cluster, a /48 a whole IPv6 site.
const (
	wideIPv4Bits = 16
	wideIPv6Bits = 48
)

// ParseIPBlock reads an ipBlocks entry as istiod converts it for ztunnel: a CIDR range if it holds
// a '/', else a single address, a range of one (istio/istio
// pilot/pkg/serviceregistry/ambient/authorization.go, stringToIP). That conversion skips an entry
// it cannot parse, and a rule left with no source would admit every caller, so validation must
// refuse every entry this does not read.
func ParseIPBlock(s string) (netip.Prefix, error) {
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
// it narrower than it is), a /0, which admits every address past the waypoint, and an
// IPv4-mapped IPv6 range.
func validateIPBlock(path *field.Path, s string) field.ErrorList {
	p, err := ParseIPBlock(s)
	if err != nil {
		return field.ErrorList{field.Invalid(path, s, "must be a CIDR range such as 10.8.0.0/16 or a single address such as 10.8.3.4 ("+err.Error()+")")}
	}
	if p.Bits() == 0 {
		return field.ErrorList{field.Invalid(path, s,
			"a /0 admits every address, in or out of the mesh, straight to every pod past the waypoint, which is no policy at all; name the scraper's own addresses")}
	}
	if m := p.Masked(); m.Addr().Is4In6() {
		return field.ErrorList{field.Invalid(path, s, mappedMessage(m))}
	}
	if m := p.Masked(); m != p {
		return field.ErrorList{field.Invalid(path, s, fmt.Sprintf("has bits set past the prefix length; the range it means is %s: write that", m))}
	}
	return nil
}

// mappedMessage explains why an IPv4-mapped IPv6 range (::ffff:a.b.c.d/n, n >= 96) is refused.
// istiod passes its 16 bytes through unchanged (stringToIP: AsSlice, Length n), while ztunnel sees
// an IPv4 client's address as IPv4: the entry would admit nothing, or, on a data plane that maps
// IPv4 sources into IPv6, every IPv4 client it covers, without the IPv4 width warning.
func mappedMessage(m netip.Prefix) string {
	v4 := netip.PrefixFrom(m.Addr().Unmap(), m.Bits()-96)
	form := v4.String()
	if v4.Bits() == 32 {
		form = v4.Addr().String()
	}
	msg := "is an IPv4-mapped IPv6 range, which ztunnel never compares with an IPv4 client's address as written (it sees IPv4 clients as IPv4), " +
		"so it would admit nothing, or every IPv4 client in it unchecked; "
	if v4.Bits() == 0 {
		return msg + "it is every IPv4 address, which a /0 would be: name the client's own addresses"
	}
	return msg + "write the IPv4 form " + form
}

// wideIPBlock says whether s, a valid entry, is wider than a /16 (IPv4) or a /48 (IPv6).
func wideIPBlock(s string) bool {
	p, err := ParseIPBlock(s)
	if err != nil {
		return false
	}
	if p.Addr().Is4() {
		return p.Bits() < wideIPv4Bits
	}
	return p.Bits() < wideIPv6Bits
}

// placedBlock is a valid ipBlocks entry and its field path.
type placedBlock struct {
	path   *field.Path
	value  string
	prefix netip.Prefix
}

// ipBlocksCoverAFamily refuses ipBlocks that together, across every L4 exception, cover every
// IPv4 or every IPv6 address: the halves 0.0.0.0/1 and 128.0.0.0/1 admit what the refused /0
// would. Entries validateIPBlock refuses are left out; they have their own error.
func ipBlocksCoverAFamily(path *field.Path, exceptions []L4Exception) field.ErrorList {
	var v4, v6 []placedBlock
	for i, e := range exceptions {
		for j, s := range e.IPBlocks {
			p := path.Index(i).Child("ipBlocks").Index(j)
			if len(validateIPBlock(p, s)) > 0 {
				continue
			}
			prefix, _ := ParseIPBlock(s)
			if prefix.Addr().Is4() {
				v4 = append(v4, placedBlock{p, s, prefix})
			} else {
				v6 = append(v6, placedBlock{p, s, prefix})
			}
		}
	}
	var errs field.ErrorList
	for _, family := range []struct {
		name   string
		blocks []placedBlock
	}{{"IPv4", v4}, {"IPv6", v6}} {
		if !coversFamily(family.blocks) {
			continue
		}
		entries := make([]string, 0, len(family.blocks))
		for _, b := range family.blocks {
			entries = append(entries, fmt.Sprintf("%s=%s", b.path, b.value))
		}
		errs = append(errs, field.Invalid(path, strings.Join(entries, ", "),
			"these ipBlocks together cover every "+family.name+" address, which admits what a /0 would: every address, in or out of the mesh, "+
				"straight to every pod past the waypoint; name the client's own addresses"))
	}
	return errs
}

// coversFamily says whether the prefixes, all of one address family, together hold every
// address of it. It sweeps them in address order, tracking the first address not yet covered.
func coversFamily(blocks []placedBlock) bool {
	if len(blocks) == 0 {
		return false
	}
	prefixes := make([]netip.Prefix, 0, len(blocks))
	for _, b := range blocks {
		prefixes = append(prefixes, b.prefix)
	}
	slices.SortFunc(prefixes, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	next := netip.IPv4Unspecified()
	if !prefixes[0].Addr().Is4() {
		next = netip.IPv6Unspecified()
	}
	for _, p := range prefixes {
		if next.Less(p.Addr()) {
			return false // a gap before p
		}
		last := lastAddr(p)
		if !last.Next().IsValid() {
			return true // reached the family's last address
		}
		if next.Less(last.Next()) {
			next = last.Next()
		}
	}
	return false
}

// lastAddr is the highest address of the masked prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

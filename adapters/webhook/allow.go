package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// ErrNotAllowed is wrapped by every refusal of a destination outside the
// allow-list: a handler's URL (at construction), a redirect's target and
// a connection to an address that is not allowed (after DNS resolution).
var ErrNotAllowed = errors.New("webhook: destination not allowed")

// allowList is the parsed Config.AllowHosts.
//
// A URL's host is allowed when an entry names it (a host name compared
// without case and without a trailing dot, or an IP address) or when it is
// an IP address inside an allowed prefix; an entry with a port allows that
// port only. The address a connection is about to dial (after the name was
// resolved) is allowed when it is an allowed IP address or inside an
// allowed prefix, or when it is a public address (see isPublic) and the
// list allows some host name: a name resolving to a loopback, private,
// link-local or otherwise internal address is refused unless that address
// is allowed too. This is the check of SSRF guards such as Stripe's
// smokescreen and doyensec's safeurl: the resolved address, not the name,
// decides, at the moment of the connection, so DNS answers that change
// between the check and the use (rebinding) cannot reach internal
// services.
type allowList struct {
	names    []hostPort // host names, lower case, no trailing dot
	addrs    []addrPort
	prefixes []netip.Prefix
}

type hostPort struct {
	host string
	port int // 0: any
}

type addrPort struct {
	addr netip.Addr
	port int // 0: any
}

// parseAllowList reads entries of the forms "host", "host:port", "ip",
// "ip:port", "[ipv6]:port" and "ip/bits".
func parseAllowList(entries []string) (*allowList, error) {
	a := &allowList{}
	for _, e := range entries {
		s := strings.TrimSpace(e)
		if s == "" {
			return nil, fmt.Errorf("webhook: empty allowed host")
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("webhook: allowed host %q: not an IP prefix such as 10.0.0.0/8: %v", e, err)
			}
			a.prefixes = append(a.prefixes, p.Masked())
			continue
		}
		host, port := s, 0
		if h, p, err := net.SplitHostPort(s); err == nil {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("webhook: allowed host %q: port %q is not 1..65535", e, p)
			}
			host, port = h, n
		} else if strings.Count(s, ":") == 1 {
			return nil, fmt.Errorf("webhook: allowed host %q: %v", e, err)
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if ip, err := netip.ParseAddr(host); err == nil {
			a.addrs = append(a.addrs, addrPort{ip.Unmap().WithZone(""), port})
			continue
		}
		name := normalizeHost(host)
		if !validHostName(name) {
			return nil, fmt.Errorf("webhook: allowed host %q is not a host name, an IP address or an IP prefix", e)
		}
		a.names = append(a.names, hostPort{name, port})
	}
	return a, nil
}

func normalizeHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// validHostName accepts letters, digits, '-', '_' and '.' labels.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// urlPort returns u's port, or the scheme's default.
func urlPort(u *url.URL) int {
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// checkURL returns nil when u is an http(s) URL to an allowed host and
// port, and otherwise an error wrapping ErrNotAllowed (or saying what is
// wrong with the URL).
func (a *allowList) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("webhook: %s: the scheme must be http or https", u.Redacted())
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("webhook: %s: no host", u.Redacted())
	}
	port := urlPort(u)
	if ip, err := netip.ParseAddr(host); err == nil {
		if a.addrAllowed(ip, port) {
			return nil
		}
	} else {
		name := normalizeHost(host)
		for _, n := range a.names {
			if n.host == name && (n.port == 0 || n.port == port) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %s (host %s, port %d) is not on the allow-list", ErrNotAllowed, u.Redacted(), host, port)
}

// addrAllowed reports whether ip:port is allowed by an IP entry or prefix.
func (a *allowList) addrAllowed(ip netip.Addr, port int) bool {
	ip = ip.Unmap().WithZone("")
	for _, e := range a.addrs {
		if e.addr == ip && (e.port == 0 || e.port == port) {
			return true
		}
	}
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// control is the net.Dialer Control of every connection: it runs after
// name resolution, with the address about to be dialed.
func (a *allowList) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the dialed address %q: %v", ErrNotAllowed, address, err)
	}
	ip, port := ap.Addr().Unmap().WithZone(""), int(ap.Port())
	if a.addrAllowed(ip, port) || (len(a.names) > 0 && isPublic(ip)) {
		return nil
	}
	return fmt.Errorf("%w: address %s is not allowed (an allowed name resolved to an internal address, which must be allowed itself)", ErrNotAllowed, ap)
}

// internal are the ranges besides those netip classifies that no public
// host has: shared address space (RFC 6598), IETF protocol assignments,
// documentation and benchmarking nets, reserved class E, the NAT64 and
// 6to4 prefixes (which embed IPv4 addresses, internal ones included) and
// the IPv6 documentation prefix.
var internal = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// isPublic reports whether ip is a global unicast address outside every
// private, loopback, link-local and special-purpose range.
func isPublic(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() ||
		ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() {
		return false
	}
	for _, p := range internal {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

package node

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// advertised returns the host and port other nodes dial to reach a node
// whose actor system binds host:port: advertise when given (a host, or
// host:port whose port replaces port); otherwise host itself, unless it is
// a wildcard (0.0.0.0, ::, ""), which no other machine can dial: then this
// machine's first non-loopback address (IPv4 first) among addrs.
func advertised(host string, port int, advertise string, addrs func() ([]net.Addr, error)) (string, int, error) {
	if advertise != "" {
		h, p, err := net.SplitHostPort(advertise)
		if err != nil { // a host alone (an IPv6 address without brackets too)
			return strings.Trim(advertise, "[]"), port, nil
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("%w: cluster.advertise %q: port must be in 1..65535", ErrBind, advertise)
		}
		return h, n, nil
	}
	if !wildcard(host) {
		return host, port, nil
	}
	list, err := addrs()
	if err != nil {
		return "", 0, fmt.Errorf("%w: cluster.host %q: this machine's addresses: %w (set cluster.advertise)", ErrBind, host, err)
	}
	var v6 net.IP
	for _, a := range list {
		ipn, ok := a.(*net.IPNet)
		if !ok || !ipn.IP.IsGlobalUnicast() {
			continue
		}
		if ipn.IP.To4() != nil {
			return ipn.IP.String(), port, nil
		}
		if v6 == nil {
			v6 = ipn.IP
		}
	}
	if v6 != nil {
		return v6.String(), port, nil
	}
	return "", 0, fmt.Errorf("%w: cluster.host %q: this machine has no address other nodes can dial: set cluster.advertise", ErrBind, host)
}

// wildcard reports whether host binds every address of the machine.
func wildcard(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsUnspecified()
}

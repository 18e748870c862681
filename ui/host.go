package ui

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// hosts is the set of host names the dashboard answers to (see
// Options.AllowedHosts): a request naming another host in its Host header
// is refused before any route runs, so a page whose name an attacker
// re-resolves to the dashboard's address (DNS rebinding) reads no page,
// gets no cookie or token, and acts on nothing.
type hosts struct {
	// any turns the check off ("*").
	any bool
	// names are the names allowed exactly, lower case, without a final dot.
	names map[string]bool
	// domains are the names whose subdomains are allowed too (from
	// ".example.com"), lower case, without their leading or final dot.
	domains []string
}

// CheckAllowedHosts reports what is wrong with a list of allowed host
// names for Options.AllowedHosts: each is a host name ("ops.example.com"),
// a domain with a leading dot (".example.com": it and its subdomains), an
// IP address, or "*" (every host); none has a port, a scheme or a path.
// New panics on a list this refuses; a command that takes the names from
// its user checks them with it first.
func CheckAllowedHosts(names []string) error {
	_, err := newHosts(names)
	return err
}

func newHosts(list []string) (*hosts, error) {
	hs := &hosts{names: map[string]bool{}}
	for _, n := range list {
		name := strings.ToLower(strings.TrimSuffix(n, "."))
		if name == "*" {
			hs.any = true
			continue
		}
		if ip, ok := strings.CutPrefix(name, "["); ok {
			name = strings.TrimSuffix(ip, "]")
		}
		if _, err := netip.ParseAddr(name); err == nil {
			continue // IP addresses are always allowed
		}
		domain, isDomain := strings.CutPrefix(name, ".")
		if err := checkHostName(domain); err != nil {
			return nil, fmt.Errorf("allowed host %q: %v", n, err)
		}
		if isDomain {
			hs.domains = append(hs.domains, domain)
		} else {
			hs.names[domain] = true
		}
	}
	return hs, nil
}

// checkHostName checks an allowed name: letters, digits, '-', '_' and
// dots between labels, as DNS names are written.
func checkHostName(name string) error {
	if name == "" {
		return fmt.Errorf("want a host name, such as ops.example.com")
	}
	if strings.Contains(name, "://") || strings.Contains(name, "/") {
		return fmt.Errorf("want a host name alone, without a scheme or a path")
	}
	if strings.Contains(name, ":") {
		return fmt.Errorf("want a host name without a port: the dashboard answers to an allowed name on any port")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" {
			return fmt.Errorf("empty label: want a host name, such as ops.example.com")
		}
		for _, r := range label {
			if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("invalid character %q: host names are letters, digits, '-' and '.' (write an international name in its xn-- form)", r)
			}
		}
	}
	return nil
}

// allows reports whether the dashboard answers to the Host header h
// ("name", "name:port", "[v6]:port"): loopback names (localhost and its
// subdomains) and IP addresses always, since no other site's page can
// have them for its origin; the allowed names besides.
func (hs *hosts) allows(h string) bool {
	if hs.any {
		return true
	}
	name, ok := hostName(h)
	if !ok {
		return false
	}
	if strings.HasPrefix(h, "[") {
		// A bracketed literal is an IPv6 address, nothing else.
		a, err := netip.ParseAddr(name)
		return err == nil && a.Is6()
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") || hs.names[name] {
		return true
	}
	for _, d := range hs.domains {
		if name == d || strings.HasSuffix(name, "."+d) {
			return true
		}
	}
	return false
}

// hostName is the name in a Host header, without its port or an IPv6
// address's brackets; ok is false when the header is malformed.
func hostName(h string) (name string, ok bool) {
	if h == "" {
		return "", false
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: a name, an IPv4 address or a bracketed IPv6 address.
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			return h[1 : len(h)-1], true
		}
		if strings.ContainsAny(h, ":[]") {
			return "", false
		}
		return h, true
	}
	if host == "" || strings.Trim(port, "0123456789") != "" {
		return "", false
	}
	if strings.Contains(host, ":") != strings.HasPrefix(h, "[") {
		return "", false
	}
	return host, true
}

// misdirected refuses a request for a host the dashboard does not answer
// to: 421 Misdirected Request, in plain words, with no page, cookie or
// token.
func misdirected(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	w.WriteHeader(http.StatusMisdirectedRequest)
	name, ok := hostName(r.Host)
	if !ok {
		name = r.Host
	}
	fmt.Fprintf(w, "The Stem dashboard does not answer to the host %q.\n\n"+
		"It answers to localhost and IP addresses, and to the names it is told to allow,\n"+
		"so that a web page whose name is made to resolve to this server (DNS rebinding)\n"+
		"can neither read the runs nor act on them. If you reach the dashboard by this\n"+
		"name, allow it: stem ui --allowed-host %s, or ui.Options.AllowedHosts.\n", r.Host, safeArg(name))
}

// safeArg is a host name as the message may suggest it on a command line:
// the name when it is plain, else a placeholder.
func safeArg(name string) string {
	if checkHostName(strings.ToLower(name)) != nil {
		return "NAME"
	}
	return strings.ToLower(name)
}

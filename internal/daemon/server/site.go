package server

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// A web page in the operator's browser is an attacker: it may send
// requests to a loopback server (a form, fetch in no-cors mode, which
// needs no preflight), and with DNS rebinding its own host name may
// resolve to 127.0.0.1, making it "same-origin" in the browser's eyes.
// The server answers only requests that name it (Host) and that no foreign
// page sent (Origin, Sec-Fetch-Site), and requires application/json on
// every body (checkJSON), which a page can send only after a CORS
// preflight that only configured origins pass.

// Codes of the checks here (ErrDenied: 403).
const (
	CodeHostNotAllowed   = "host_not_allowed"
	CodeOriginNotAllowed = "origin_not_allowed"
)

// securityHeaders go on every answer: nothing is sniffed as another type,
// framed, cached, or readable by another origin's page.
func securityHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// hostOnly is the host of a Host header or URL host, without port or
// trailing dot, lower-cased; IPv6 brackets removed.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimPrefix(strings.TrimSuffix(h, "]"), "[")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// hostAllowed says whether a request's Host names this server: an IP
// address (no DNS name to rebind), localhost, or a configured name ("*":
// any). An empty Host (HTTP/1.0, no browser sends one) is allowed.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	h := hostOnly(host)
	if net.ParseIP(h) != nil || h == "localhost" {
		return true
	}
	return slices.Contains(s.opts.AllowedHosts, "*") || slices.Contains(s.hosts, h)
}

// originAllowed says whether origin is a configured allowed origin.
func (s *Server) originAllowed(origin string) bool {
	return origin != "" && slices.Contains(s.origins, strings.ToLower(strings.TrimSuffix(origin, "/")))
}

// sameOrigin says whether origin names the host the request was sent to,
// as a page the server served itself would (its scheme may differ behind
// a TLS proxy).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(withPort(u.Host, u.Scheme), withPort(host, "http")) ||
		strings.EqualFold(withPort(u.Host, u.Scheme), withPort(host, "https"))
}

// withPort adds scheme's default port to a host without one.
func withPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.Trim(host, "[]"), "443")
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}

// checkSite refuses a request a foreign page (or a rebound name) could
// have sent, and answers a CORS preflight; it reports whether the request
// was answered.
func (s *Server) checkSite(w http.ResponseWriter, r *http.Request) bool {
	if !s.hostAllowed(r.Host) {
		writeProblem(w, r, v1.NewProblem(sandbox.Errorf(sandbox.ErrDenied, CodeHostNotAllowed,
			"Host %q is not a name of this server: use its IP address or localhost, or add the name to server.allowed_hosts", hostOnly(r.Host))))
		return true
	}
	origin := r.Header.Get("Origin")
	allowed := s.originAllowed(origin)
	if allowed {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After")
	}
	// A preflight: only for configured origins.
	if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		if !allowed {
			writeProblem(w, r, v1.NewProblem(sandbox.Errorf(sandbox.ErrDenied, CodeOriginNotAllowed,
				"origin %q may not call this server from a browser (server.allowed_origins)", origin)))
			return true
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Methods", "GET, POST")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	// A request a page of another origin sent: Origin says so (every
	// cross-origin fetch, and any POST), or Sec-Fetch-Site does (even a
	// no-cors GET, which carries no Origin).
	site := r.Header.Get("Sec-Fetch-Site")
	foreign := origin != "" && !sameOrigin(origin, r.Host) || site == "cross-site" || site == "same-site"
	if foreign && !allowed {
		what := origin
		if what == "" {
			what = "a page of another site (Sec-Fetch-Site: " + site + ")"
		} else {
			what = "origin " + what
		}
		writeProblem(w, r, v1.NewProblem(sandbox.Errorf(sandbox.ErrDenied, CodeOriginNotAllowed,
			"%s may not call this server from a browser (server.allowed_origins)", what)))
		return true
	}
	return false
}

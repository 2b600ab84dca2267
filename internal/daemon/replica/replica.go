package replica

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// ErrGone is a Finder's answer for a replica that no longer exists: its
// sessions are gone with it.
var ErrGone = errors.New("no such replica")

// Finder returns the base URL ("http://10.0.0.7:8080") replica name is
// reached at, ErrGone when there is no such replica, or another error when
// it cannot tell now.
type Finder interface {
	Find(ctx context.Context, name string) (string, error)
}

// nameRE is a DNS label, as a Pod's name from a Deployment is: no dot, so
// the first dot of an id ends the name.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ValidName reports whether name can name a replica.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Of returns the replica a session id names, if it names one: the
// engine makes ids as name + "." + the sandbox's id.
func Of(id string) (string, bool) {
	name, _, ok := strings.Cut(id, ".")
	return name, ok && ValidName(name)
}

// Static finds replicas in a fixed list, name → base URL.
type Static map[string]string

// ParsePeers reads "name=http://host:port" entries.
func ParsePeers(list []string) (Static, error) {
	s := Static{}
	for _, p := range list {
		name, base, ok := strings.Cut(p, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%q is not name=http://host:port", p)
		case !ValidName(name):
			return nil, fmt.Errorf("replica name %q: must be a DNS label (lower-case letters, digits, dashes)", name)
		case s[name] != "":
			return nil, fmt.Errorf("replica %s is listed twice", name)
		}
		if err := checkURL(base); err != nil {
			return nil, fmt.Errorf("replica %s: %w", name, err)
		}
		s[name] = strings.TrimSuffix(base, "/")
	}
	return s, nil
}

// checkURL says whether base can be a replica's base URL.
func checkURL(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not a base URL (http://host:port)", base)
	}
	return nil
}

// Find implements Finder.
func (s Static) Find(_ context.Context, name string) (string, error) {
	if base, ok := s[name]; ok {
		return base, nil
	}
	return "", ErrGone
}

package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox/errmap"
	"github.com/execbox/execbox/sandbox"
)

// Token is one configured bearer token.
type Token struct {
	Name  string
	Hash  [sha256.Size]byte
	Admin bool
	// Limits: 0 means unset (the Authenticator's default applies).
	Concurrency int
	Rate        float64 // requests per second
	Burst       int
}

// DefaultName is the name of the token EXECBOX_TOKEN sets, and Anonymous
// the identity of requests when no token is configured.
const (
	DefaultName = "default"
	Anonymous   = "anonymous"
)

// The stable codes of this package's errors.
const (
	// CodeUnauthenticated: no bearer token, or an unknown one (ErrDenied;
	// HTTP answers it 401).
	CodeUnauthenticated = errmap.CodeUnauthenticated
	// CodeRateLimited: the token is over its rate (ErrBusy).
	CodeRateLimited = "rate_limited"
	// CodeTooManyInFlight: the token has its most executions in flight
	// (ErrBusy).
	CodeTooManyInFlight = "too_many_in_flight"
)

// MaxNameLen bounds a token name.
const MaxNameLen = 64

// HashSecret returns the hex SHA-256 of secret, the form tokens are
// configured in (the same as `printf %s SECRET | sha256sum`).
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// FromSecret is the admin token named "default" with secret (EXECBOX_TOKEN).
func FromSecret(secret string) Token {
	return Token{Name: DefaultName, Hash: sha256.Sum256([]byte(secret)), Admin: true}
}

func bad(entry string, format string, args ...any) error {
	name, _, _ := strings.Cut(entry, ":")
	return sandbox.Errorf(sandbox.ErrInvalid, "token_invalid", "token %q: %s", name, fmt.Sprintf(format, args...))
}

// ParseToken parses a "NAME:SHA256HEX[:OPTION]..." entry. Errors name the
// token, never echo its hash.
func ParseToken(entry string) (Token, error) {
	parts := strings.Split(entry, ":")
	if len(parts) < 2 {
		return Token{}, bad(entry, "want NAME:SHA256HEX[:admin][:concurrency=N][:rate=R][:burst=N]")
	}
	t := Token{Name: parts[0]}
	if err := checkName(t.Name); err != nil {
		return Token{}, bad(entry, "%v", err)
	}
	h, err := hex.DecodeString(parts[1])
	if err != nil || len(h) != sha256.Size {
		return Token{}, bad(entry, "the hash must be 64 hex digits (the SHA-256 of the secret: printf %%s SECRET | sha256sum)")
	}
	copy(t.Hash[:], h)
	for _, opt := range parts[2:] {
		k, v, hasValue := strings.Cut(opt, "=")
		switch {
		case k == "admin" && !hasValue:
			t.Admin = true
		case k == "concurrency" && hasValue:
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return Token{}, bad(entry, "concurrency=%q: want a whole number above 0", v)
			}
			t.Concurrency = n
		case k == "rate" && hasValue:
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
				return Token{}, bad(entry, "rate=%q: want requests per second above 0", v)
			}
			t.Rate = r
		case k == "burst" && hasValue:
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return Token{}, bad(entry, "burst=%q: want a whole number above 0", v)
			}
			t.Burst = n
		default:
			return Token{}, bad(entry, "unknown option %q (want admin, concurrency=N, rate=R, burst=N)", opt)
		}
	}
	return t, nil
}

func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return errors.New("the name must be 1 to 64 characters")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return errors.New("the name may hold letters, digits, '-', '_' and '.'")
		}
	}
	return nil
}

// Limits are the per-token limits of tokens that set none, and the bound
// on failed authentications per remote address; zero is unlimited.
type Limits struct {
	Concurrency int
	Rate        float64
	Burst       int
	// FailureRate (per second) and FailureBurst bound the failed
	// authentications of one remote address (Check).
	FailureRate  float64
	FailureBurst int
}

// Authenticator checks bearer tokens.
type Authenticator struct {
	ids      []*Identity
	anon     *Identity
	failures *failures
}

// New returns an Authenticator for tokens; def fills the limits a token
// leaves unset.
func New(tokens []Token, def Limits) (*Authenticator, error) {
	a := &Authenticator{failures: newFailures(def.FailureRate, def.FailureBurst)}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	for _, t := range tokens {
		if err := checkName(t.Name); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "token_invalid", "token %q: %v", t.Name, err)
		}
		if names[t.Name] {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "token_invalid", "token %q is configured twice", t.Name)
		}
		if hashes[t.Hash] {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "token_invalid", "token %q has the same secret as another token", t.Name)
		}
		names[t.Name], hashes[t.Hash] = true, true
		if t.Concurrency == 0 {
			t.Concurrency = def.Concurrency
		}
		if t.Rate == 0 {
			t.Rate, t.Burst = def.Rate, max(t.Burst, def.Burst)
		}
		a.ids = append(a.ids, newIdentity(t))
	}
	a.anon = newIdentity(Token{Name: Anonymous, Concurrency: def.Concurrency, Rate: def.Rate, Burst: def.Burst})
	return a, nil
}

// Enabled reports whether any token is configured.
func (a *Authenticator) Enabled() bool { return len(a.ids) > 0 }

// HasAdmin reports whether an admin token is configured.
func (a *Authenticator) HasAdmin() bool {
	for _, id := range a.ids {
		if id.Admin {
			return true
		}
	}
	return false
}

// Names lists the configured token names.
func (a *Authenticator) Names() []string {
	out := make([]string, len(a.ids))
	for i, id := range a.ids {
		out[i] = id.Name
	}
	return out
}

// Authenticate checks an Authorization header value. With no token
// configured it returns the anonymous identity whatever the header says.
// A missing, malformed or unknown token is an error of kind ErrDenied with
// code unauthenticated (HTTP 401).
func (a *Authenticator) Authenticate(header string) (*Identity, error) {
	if !a.Enabled() {
		return a.anon, nil
	}
	scheme, secret, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return nil, sandbox.Errorf(sandbox.ErrDenied, CodeUnauthenticated, "a bearer token is required (Authorization: Bearer <token>)")
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	var found *Identity
	for _, id := range a.ids {
		// Every hash is compared, match or not: no early exit to time.
		if subtle.ConstantTimeCompare(h[:], id.hash[:]) == 1 {
			found = id
		}
	}
	if found == nil {
		return nil, sandbox.Errorf(sandbox.ErrDenied, CodeUnauthenticated, "the bearer token is not valid")
	}
	return found, nil
}

// Check is Authenticate for a request from the remote address addr (an IP
// address, without the port), bounding failed authentications per address
// (Limits.FailureRate and FailureBurst). A failed authentication is a
// request that presents credentials (any Authorization header) matching
// no token; each spends one of addr's budget, and while it is spent the
// address's requests that present credentials are refused before they are
// looked at, with a *BusyError (ErrBusy, code CodeAuthThrottled), so
// guessing a secret is slow. A request without credentials is refused as
// by Authenticate and spends nothing: it guesses nothing, and counting it
// would let anyone on an address shut that address's clients out. With no
// token configured Check admits everyone as Authenticate does.
func (a *Authenticator) Check(addr, header string) (*Identity, error) {
	if !a.Enabled() {
		return a.anon, nil
	}
	if header == "" {
		return a.Authenticate(header)
	}
	if err := a.failures.check(addr); err != nil {
		return nil, err
	}
	id, err := a.Authenticate(header)
	if err != nil {
		a.failures.failed(addr)
	}
	return id, err
}

// Identity is who a request is: a token, or anonymous.
type Identity struct {
	Name  string
	Admin bool
	hash  [sha256.Size]byte

	concurrency int
	inFlight    chan struct{} // nil: unlimited

	mu     sync.Mutex
	rate   float64 // tokens per second; 0: unlimited
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newIdentity(t Token) *Identity {
	id := &Identity{Name: t.Name, Admin: t.Admin, hash: t.Hash, concurrency: t.Concurrency, rate: t.Rate, now: time.Now}
	if t.Concurrency > 0 {
		id.inFlight = make(chan struct{}, t.Concurrency)
	}
	if t.Rate > 0 {
		id.burst = float64(t.Burst)
		if id.burst <= 0 {
			id.burst = math.Max(1, math.Ceil(t.Rate))
		}
		id.tokens = id.burst
	}
	return id
}

// BusyError is a refusal by a token's limits: ErrBusy with a hint of when
// to retry.
type BusyError struct {
	Err   error
	After time.Duration
}

func (e *BusyError) Error() string { return e.Err.Error() }
func (e *BusyError) Unwrap() error { return e.Err }

// RetryAfter is when the caller may try again.
func (e *BusyError) RetryAfter() time.Duration { return e.After }

// Admit takes one request against the identity's rate and concurrency
// limits. On success the caller must call release when the execution
// ends; on refusal the error is a *BusyError (ErrBusy, code rate_limited
// or too_many_in_flight).
func (id *Identity) Admit() (release func(), err error) {
	if id.rate > 0 {
		id.mu.Lock()
		now := id.now()
		if !id.last.IsZero() {
			id.tokens = math.Min(id.burst, id.tokens+now.Sub(id.last).Seconds()*id.rate)
		}
		id.last = now
		if id.tokens < 1 {
			wait := time.Duration((1 - id.tokens) / id.rate * float64(time.Second))
			id.mu.Unlock()
			return nil, &BusyError{After: wait, Err: sandbox.Errorf(sandbox.ErrBusy, CodeRateLimited,
				"token %s is over its rate limit of %g requests per second; retry in %s", id.Name, id.rate, wait.Round(time.Millisecond))}
		}
		id.tokens--
		id.mu.Unlock()
	}
	if id.inFlight == nil {
		return func() {}, nil
	}
	select {
	case id.inFlight <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-id.inFlight }) }, nil
	default:
		return nil, &BusyError{After: time.Second, Err: sandbox.Errorf(sandbox.ErrBusy, CodeTooManyInFlight,
			"token %s already has %d executions in flight, its limit", id.Name, id.concurrency)}
	}
}

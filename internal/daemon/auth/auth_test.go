package auth

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

var hashA = HashSecret("secret-a")

func TestHashSecret(t *testing.T) {
	// The FIPS 180-2 test vector: what `printf %s abc | sha256sum` prints.
	if HashSecret("abc") != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatal("HashSecret is not hex SHA-256")
	}
}

func TestParseToken(t *testing.T) {
	tok, err := ParseToken("ci-bot.1:" + hashA + ":admin:concurrency=2:rate=1.5:burst=3")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name != "ci-bot.1" || !tok.Admin || tok.Concurrency != 2 || tok.Rate != 1.5 || tok.Burst != 3 {
		t.Fatalf("%+v", tok)
	}
	if _, err := ParseToken(strings.Repeat("n", MaxNameLen) + ":" + hashA); err != nil {
		t.Errorf("a 64-character name: %v", err)
	}
	for _, bad := range []string{
		"",
		"ci",
		":" + hashA,
		strings.Repeat("n", MaxNameLen+1) + ":" + hashA,
		"c i:" + hashA,
		"ci:" + hashA[:63],
		"ci:" + hashA + "0",
		"ci:" + strings.Repeat("g", 64),
		"ci:" + hashA + ":root",
		"ci:" + hashA + ":admin=yes",
		"ci:" + hashA + ":concurrency=0",
		"ci:" + hashA + ":concurrency=x",
		"ci:" + hashA + ":rate=0",
		"ci:" + hashA + ":rate=-1",
		"ci:" + hashA + ":rate=NaN",
		"ci:" + hashA + ":rate=+Inf",
		"ci:" + hashA + ":burst=0",
	} {
		_, err := ParseToken(bad)
		if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "token_invalid" {
			t.Errorf("%q: %v", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), hashA[:16]) {
			t.Errorf("%q: the error echoes the hash: %v", bad, err)
		}
	}
}

func TestNewRefusesDuplicates(t *testing.T) {
	a, _ := ParseToken("a:" + hashA)
	b, _ := ParseToken("b:" + hashA)
	a2, _ := ParseToken("a:" + HashSecret("other"))
	for _, toks := range [][]Token{{a, b}, {a, a2}, {{Name: "bad name"}}} {
		if _, err := New(toks, Limits{}); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%v: %v", toks, err)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	none, _ := New(nil, Limits{})
	id, err := none.Authenticate("Bearer whatever")
	if err != nil || id.Name != Anonymous || id.Admin || none.Enabled() {
		t.Fatalf("no tokens: %+v %v", id, err)
	}
	user, _ := ParseToken("user:" + hashA)
	a, err := New([]Token{user, FromSecret("admin-secret")}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.Names(), ",") != "user,default" {
		t.Fatalf("names %v", a.Names())
	}
	for header, want := range map[string]string{
		"Bearer secret-a":       "user",
		"bearer secret-a":       "user",
		"Bearer  secret-a ":     "user",
		"Bearer admin-secret":   DefaultName,
		"Bearer secret-b":       "",
		"Bearer ":               "",
		"Basic c2VjcmV0LWE=":    "",
		"secret-a":              "",
		"":                      "",
		"Bearer secret-a extra": "",
	} {
		id, err := a.Authenticate(header)
		switch {
		case want == "" && (err == nil || sandbox.CodeOf(err) != CodeUnauthenticated || !errors.Is(err, sandbox.ErrDenied)):
			t.Errorf("%q: %+v %v, want unauthenticated", header, id, err)
		case want != "" && (err != nil || id.Name != want):
			t.Errorf("%q: %+v %v, want %s", header, id, err, want)
		}
	}
	id, _ = a.Authenticate("Bearer admin-secret")
	if !id.Admin {
		t.Error("EXECBOX_TOKEN's token is an admin token")
	}
	id, _ = a.Authenticate("Bearer secret-a")
	if id.Admin {
		t.Error("user is not an admin")
	}
}

func TestAdmitConcurrency(t *testing.T) {
	id := newIdentity(Token{Name: "c", Concurrency: 2})
	r1, err1 := id.Admit()
	r2, err2 := id.Admit()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	_, err := id.Admit()
	var be *BusyError
	if !errors.As(err, &be) || !errors.Is(err, sandbox.ErrBusy) || sandbox.CodeOf(err) != CodeTooManyInFlight || be.RetryAfter() <= 0 {
		t.Fatalf("third: %v", err)
	}
	r1()
	r1() // releasing twice frees one place only
	r3, err := id.Admit()
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := id.Admit(); err == nil {
		t.Fatal("a double release freed two places")
	}
	r2()
	r3()
	// Unlimited: any number.
	u := newIdentity(Token{Name: "u"})
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if _, err := u.Admit(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestAdmitRate(t *testing.T) {
	now := time.Unix(1000, 0)
	id := newIdentity(Token{Name: "r", Rate: 2, Burst: 3})
	id.now = func() time.Time { return now }
	for i := range 3 {
		if _, err := id.Admit(); err != nil {
			t.Fatalf("burst call %d: %v", i, err)
		}
	}
	_, err := id.Admit()
	var be *BusyError
	if !errors.As(err, &be) || sandbox.CodeOf(err) != CodeRateLimited || be.RetryAfter() != 500*time.Millisecond {
		t.Fatalf("over the burst: %v (retry after %v)", err, be)
	}
	now = now.Add(499 * time.Millisecond)
	if _, err := id.Admit(); err == nil {
		t.Fatal("admitted before a token was back")
	}
	now = now.Add(2 * time.Millisecond) // 0.5 s since the refusal's refill point
	if _, err := id.Admit(); err != nil {
		t.Fatalf("after 0.5 s at 2/s: %v", err)
	}
	// A long pause refills to the burst, never past it.
	now = now.Add(time.Hour)
	for i := range 3 {
		if _, err := id.Admit(); err != nil {
			t.Fatalf("refilled call %d: %v", i, err)
		}
	}
	if _, err := id.Admit(); err == nil {
		t.Fatal("the bucket refilled past its burst")
	}
	// Burst defaults to one second of rate (at least 1).
	if newIdentity(Token{Rate: 0.2}).burst != 1 || newIdentity(Token{Rate: 4.5}).burst != 5 {
		t.Fatal("default burst")
	}
}

func TestDefaultLimits(t *testing.T) {
	own, _ := ParseToken("own:" + hashA + ":concurrency=5")
	a, err := New([]Token{own, FromSecret("x")}, Limits{Concurrency: 1, Rate: 10})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := a.Authenticate("Bearer secret-a")
	d, _ := a.Authenticate("Bearer x")
	if o.concurrency != 5 || o.rate != 10 || d.concurrency != 1 || d.rate != 10 || a.anon.concurrency != 1 {
		t.Fatalf("own %+v default %+v", o, d)
	}
}

// TestCheckThrottlesFailures: failed authentications are bounded per remote
// address (issue 22: they were neither rate-limited nor audited); past the
// budget the address is refused before its token is looked at, even a
// valid one, and other addresses are not affected; the budget refills.
func TestCheckThrottlesFailures(t *testing.T) {
	a, err := New([]Token{FromSecret("right")}, Limits{FailureRate: 0.5, FailureBurst: 3})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	a.failures.now = func() time.Time { return now }
	if id, err := a.Check("10.0.0.1", "Bearer right"); err != nil || id.Name != DefaultName {
		t.Fatalf("valid: %v %v", id, err)
	}
	for i := range 3 {
		if _, err := a.Check("10.0.0.1", "Bearer wrong"); !errors.Is(err, sandbox.ErrDenied) {
			t.Fatalf("failure %d: %v, want unauthenticated", i, err)
		}
	}
	_, err = a.Check("10.0.0.1", "Bearer right")
	var be *BusyError
	if !errors.As(err, &be) || sandbox.CodeOf(err) != CodeAuthThrottled || be.RetryAfter() != 2*time.Second {
		t.Fatalf("past the budget, even the right token: %v, want %s with a 2s retry", err, CodeAuthThrottled)
	}
	if _, err := a.Check("10.0.0.2", "Bearer right"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	// No credentials: refused as ever, never throttled, spending nothing.
	for range 10 {
		if _, err := a.Check("10.0.0.2", ""); !errors.Is(err, sandbox.ErrDenied) {
			t.Fatalf("no credentials: %v", err)
		}
	}
	if _, err := a.Check("10.0.0.2", "Bearer right"); err != nil {
		t.Fatalf("after requests without credentials: %v", err)
	}
	now = now.Add(2 * time.Second)
	if _, err := a.Check("10.0.0.1", "Bearer right"); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	// The addresses remembered are bounded.
	for i := range maxFailureAddrs + 100 {
		a.Check(fmt.Sprintf("10.1.%d.%d", i/256, i%256), "Bearer wrong")
	}
	if n := len(a.failures.addrs); n > maxFailureAddrs {
		t.Fatalf("%d addresses remembered", n)
	}
	// Without tokens, everyone is anonymous; without a bound, nothing is
	// throttled.
	open, _ := New(nil, Limits{FailureRate: 1})
	if id, err := open.Check("x", ""); err != nil || id.Name != Anonymous {
		t.Fatalf("no tokens: %v %v", id, err)
	}
	free, _ := New([]Token{FromSecret("s")}, Limits{})
	for range 100 {
		free.Check("x", "Bearer wrong")
	}
	if _, err := free.Check("x", "Bearer s"); err != nil {
		t.Fatalf("no failure bound: %v", err)
	}
}

func TestHasAdmin(t *testing.T) {
	user, _ := ParseToken("u:" + HashSecret("u"))
	admin, _ := ParseToken("a:" + HashSecret("a") + ":admin")
	for want, tokens := range map[bool][]Token{false: {user}, true: {user, admin}} {
		a, err := New(tokens, Limits{})
		if err != nil || a.HasAdmin() != want {
			t.Errorf("%v: HasAdmin %v, want %v", err, a.HasAdmin(), want)
		}
	}
	if a, _ := New(nil, Limits{}); a.HasAdmin() {
		t.Error("no tokens: an admin")
	}
}

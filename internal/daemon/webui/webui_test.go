package webui

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// script is the entry script index.html names.
func script(t *testing.T, index string) string {
	t.Helper()
	m := regexp.MustCompile(`src="/assets/(main-[A-Z0-9]+\.js)"`).FindStringSubmatch(index)
	if m == nil {
		t.Fatalf("index.html names no entry script:\n%s", index)
	}
	return m[1]
}

func TestPages(t *testing.T) {
	h := New()
	var nonces []string
	for _, p := range []string{"/", "/functions", "/sessions/", "/no/such/page", "/assets"} {
		w := get(t, h, "GET", p)
		body := w.Body.String()
		if w.Code != 200 || w.Header().Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(body, `<main id="page">`) {
			t.Fatalf("GET %s: %d %s, want index.html", p, w.Code, w.Header().Get("Content-Type"))
		}
		if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", p, cc)
		}
		// A fresh nonce per answer, the same in the policy and the page.
		m := regexp.MustCompile(`<meta name="csp-nonce" content="([A-Za-z0-9]{16,})">`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("GET %s: no nonce in the page", p)
		}
		csp := w.Header().Get("Content-Security-Policy")
		if csp != CSP(m[1]) || !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe-eval") ||
			strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		nonces = append(nonces, m[1])
		if strings.Contains(body, "<script>") || strings.Contains(body, " style=") {
			t.Errorf("GET %s: index.html has an inline script or style", p)
		}
	}
	for i := range nonces {
		for j := range i {
			if nonces[i] == nonces[j] {
				t.Errorf("two answers share the nonce %s", nonces[i])
			}
		}
	}
	if w := get(t, h, "HEAD", "/runs"); w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") == "" {
		t.Errorf("HEAD /runs: %d, %d body bytes, Content-Length %q", w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
	}
}

func TestAssets(t *testing.T) {
	h := New()
	js := script(t, get(t, h, "GET", "/").Body.String())
	want, err := fs.ReadFile(h.files, "assets/"+js)
	if err != nil {
		t.Fatal(err)
	}

	plain := get(t, h, "GET", "/assets/"+js)
	if plain.Code != 200 || !bytes.Equal(plain.Body.Bytes(), want) || plain.Header().Get("Content-Encoding") != "" {
		t.Fatalf("GET %s without gzip: %d, %d bytes, encoding %q", js, plain.Code, plain.Body.Len(), plain.Header().Get("Content-Encoding"))
	}
	if ct := plain.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := plain.Header().Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
		t.Errorf("an asset's Cache-Control %q, want a year, immutable", cc)
	}

	zipped := get(t, h, "GET", "/assets/"+js, "Accept-Encoding", "br, gzip;q=0.8")
	if zipped.Header().Get("Content-Encoding") != "gzip" || zipped.Header().Get("Vary") != "Accept-Encoding" || zipped.Body.Len() >= len(want) {
		t.Fatalf("GET %s with gzip: encoding %q, Vary %q, %d bytes", js, zipped.Header().Get("Content-Encoding"), zipped.Header().Get("Vary"), zipped.Body.Len())
	}
	zr, err := gzip.NewReader(zipped.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the gzip copy does not hold the asset (%v)", err)
	}
	if w := get(t, h, "GET", "/assets/"+js, "Accept-Encoding", "gzip;q=0"); w.Header().Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 got %q", w.Header().Get("Content-Encoding"))
	}

	// A missing asset is 404, never the index (a script must not get
	// HTML); the gzip copies are not addressable; a path that leaves
	// /assets/ once cleaned is a page, and nothing outside dist is reached.
	for p, want := range map[string]int{
		"/assets/nope.js": 404, "/assets/" + js + ".gz": 404, "/assets/sub/" + js: 404,
		"/assets/%2e%2e/index.html": 200, "/assets/../../go.mod": 200, "/assets/": 200,
	} {
		w := get(t, h, "GET", p)
		if w.Code != want {
			t.Errorf("GET %s: %d, want %d", p, w.Code, want)
		}
		if w.Code == 200 && !strings.Contains(w.Body.String(), `<main id="page">`) {
			t.Errorf("GET %s: 200 but not the index", p)
		}
	}
}

// Every asset has a gzip copy that holds it.
func TestGzipCopies(t *testing.T) {
	h := New()
	n := 0
	err := fs.WalkDir(h.files, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".gz") {
			return err
		}
		n++
		want, err := fs.ReadFile(h.files, p)
		if err != nil {
			return err
		}
		z, err := fs.ReadFile(h.files, p+".gz")
		if err != nil {
			t.Errorf("%s has no gzip copy", p)
			return nil
		}
		zr, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return err
		}
		if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s.gz does not hold %s (%v)", p, p, err)
		}
		return nil
	})
	if err != nil || n < 3 {
		t.Fatalf("walking the assets: %v (%d assets)", err, n)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for ae, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "deflate, gzip": true, "gzip;q=0": false, "gzip; q=0.0": false,
		"gzip;q=0.5": true, "br": false, "x-gzip": false, "*": false,
	} {
		if got := acceptsGzip(ae); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", ae, got, want)
		}
	}
}

package webui

import (
	"bytes"
	"crypto/rand"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed dist
var dist embed.FS

// CSP is the Content-Security-Policy of a page whose answer's nonce is
// nonce: code, styles, images and connections from this origin only
// (images also as data: and blob: URLs), no plugins, frames, base or form
// targets. No inline script runs; a style element applies only with the
// nonce (the editor adds its styles so, and reads the nonce from the page's
// csp-nonce meta element); inline style attributes apply (the editor
// positions its parts with them).
func CSP(nonce string) string {
	return "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-" + nonce + "'; style-src-attr 'unsafe-inline'; " +
		"img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; manifest-src 'self'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"
}

// noncePlaceholder is where index.html takes each answer's nonce.
var noncePlaceholder = []byte("{{nonce}}")

// Handler serves the playground: GET and HEAD only (the caller routes
// other methods). An asset that does not exist is 404; any other path is
// a page and answers index.html.
type Handler struct {
	files fs.FS
	index []byte
}

// New returns the playground's handler.
func New() *Handler {
	files, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic("webui: dist/index.html is missing: run npm run build in web/")
	}
	return &Handler{files: files, index: index}
}

// ServeHTTP answers r. Security headers common to every answer are the
// server's; this sets the page's CSP and the caching.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := path.Clean("/" + r.URL.Path)
	if strings.HasPrefix(p, "/assets/") {
		h.asset(w, r, strings.TrimPrefix(p, "/"))
		return
	}
	nonce := rand.Text()
	page := bytes.ReplaceAll(h.index, noncePlaceholder, []byte(nonce))
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", CSP(nonce))
	// Asked again every time: each answer has its own nonce, and a new
	// build's index names new asset files.
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(page)))
	if r.Method != http.MethodHead {
		w.Write(page)
	}
}

// asset serves one hashed file, its gzip copy when the browser takes
// gzip.
func (h *Handler) asset(w http.ResponseWriter, r *http.Request, name string) {
	st, err := fs.Stat(h.files, name)
	if err != nil || !st.Mode().IsRegular() || strings.HasSuffix(name, ".gz") {
		http.Error(w, "no such asset", http.StatusNotFound)
		return
	}
	hd := w.Header()
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	hd.Set("Content-Type", ctype)
	// The name changes with the content: keep it for a year.
	hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	hd.Add("Vary", "Accept-Encoding")
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		if _, err := fs.Stat(h.files, name+".gz"); err == nil {
			hd.Set("Content-Encoding", "gzip")
			name += ".gz"
		}
	}
	b, err := fs.ReadFile(h.files, name)
	if err != nil {
		http.Error(w, "no such asset", http.StatusNotFound)
		return
	}
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// acceptsGzip says whether an Accept-Encoding takes gzip (not with q=0).
func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

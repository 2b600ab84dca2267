package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/daemon/auth"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// TestOpenAPIIsValid holds the served document to the OpenAPI 3.1 schema
// with a kept validator (pb33f/libopenapi), and checks real requests and
// answers of a live server against it, so a client generated from the
// document speaks to the server as it is.
func TestOpenAPIIsValid(t *testing.T) {
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	d, err := libopenapi.NewDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatalf("building the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("the document is not valid OpenAPI: %s: %s", e.Message, e.Reason)
		}
	}

	en := newEnv(t, setup{tokens: []auth.Token{auth.FromSecret("doc-secret")}})
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/runs", `{"command":["sh","-c","echo hi"]}`},
		{"POST", "/v1/runs", `{"code":"print(1)","limits":{"wall":"5s","memory":"64m"}}`},
		{"POST", "/v1/runs", `{"command":["true"],"limits":{"memory":"lots"}}`},
		{"GET", "/v1/health", ""},
		{"GET", "/v1/backends", ""},
		{"GET", "/healthz", ""},
	} {
		req := httptest.NewRequest(c.method, en.http.URL+c.path, strings.NewReader(c.body))
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer doc-secret")
		if ok, verrs := v.ValidateHttpRequest(req); !ok {
			for _, e := range verrs {
				t.Errorf("%s %s: the request does not fit the document: %s: %s", c.method, c.path, e.Message, e.Reason)
			}
		}
		req2, _ := http.NewRequest(c.method, en.http.URL+c.path, strings.NewReader(c.body))
		if c.body != "" {
			req2.Header.Set("Content-Type", "application/json")
		}
		req2.Header.Set("Authorization", "Bearer doc-secret")
		resp, err := en.http.Client().Do(req2)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		check, _ := http.NewRequest(c.method, en.http.URL+c.path, strings.NewReader(c.body))
		if c.body != "" {
			check.Header.Set("Content-Type", "application/json")
		}
		check.Header.Set("Authorization", "Bearer doc-secret")
		if ok, verrs := v.ValidateHttpResponse(check, resp); !ok {
			for _, e := range verrs {
				t.Errorf("%s %s → %d: the answer does not fit the document: %s: %s\n%s", c.method, c.path, resp.StatusCode, e.Message, e.Reason, compact(body))
			}
		}
	}
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

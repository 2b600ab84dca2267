package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v3"

	v1 "github.com/execbox/execbox/api/v1"
)

// OpenAPI returns the API's OpenAPI 3.1 document (v1.OpenAPIYAML) as
// JSON, as GET /v1/openapi.json serves it. The conversion happens here so
// that api/v1 and its clients need no YAML decoder. The bytes are shared:
// do not modify them.
func OpenAPI() ([]byte, error) { return openapi() }

var openapi = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(v1.OpenAPIYAML(), &doc); err != nil {
		return nil, fmt.Errorf("decoding the OpenAPI document: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the OpenAPI document: %w", err)
	}
	return b, nil
})

// handleOpenAPI is GET /v1/openapi.json.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := OpenAPI()
	if err != nil {
		writeProblem(w, r, v1.NewProblem(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}

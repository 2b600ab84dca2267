package v1

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"go.yaml.in/yaml/v3"
)

//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPI returns the API's OpenAPI 3.1 document as JSON. The bytes are
// shared: do not modify them.
func OpenAPI() ([]byte, error) { return openapi() }

var openapi = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openapiYAML, &doc); err != nil {
		return nil, fmt.Errorf("decoding the OpenAPI document: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the OpenAPI document: %w", err)
	}
	return b, nil
})

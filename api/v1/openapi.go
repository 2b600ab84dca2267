package v1

import _ "embed"

//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPIYAML returns the API's OpenAPI 3.1 document in YAML, the form it
// is written in; the server serves it as JSON at GET /v1/openapi.json.
// The bytes are shared: do not modify them.
func OpenAPIYAML() []byte { return openapiYAML }

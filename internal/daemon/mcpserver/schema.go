package mcpserver

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/sandbox"
)

// addTool adds a tool whose input schema is In's, as the SDK infers it,
// completed from the API's own description of the same fields: a model
// reads the schema, and the HTTP API's enums (language, tier,
// min_isolation) must be the ones it sees. api names the API's request
// schema the tool's fields come from (components.schemas in
// api/v1/openapi.yaml).
func addTool[In, Out any](s *mcp.Server, api string, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	t.InputSchema = inputSchema[In](api)
	mcp.AddTool(s, t, h)
}

// inputSchema is In's schema: arrays and objects not nullable (a nil
// slice is Go's absence, not an argument), enums and missing descriptions
// from the API schema api, and the backend field naming the registered
// backends. A type or schema name this package gets wrong panics at
// start, in every test.
func inputSchema[In any](api string) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: the schema of %T: %v", *new(In), err))
	}
	props, ok := apiSchemas()[api]
	if !ok {
		panic("mcpserver: the API has no schema " + api)
	}
	for name, p := range s.Properties {
		if len(p.Types) == 2 && slices.Contains(p.Types, "null") {
			p.Type, p.Types = p.Types[slices.Index(p.Types, "null")^1], nil
		}
		if w, ok := props[name]; ok {
			if p.Description == "" {
				p.Description = w.Description
			}
			if len(w.Enum) > 0 && p.Enum == nil {
				p.Enum = slices.Clone(w.Enum)
				if !slices.Contains(s.Required, name) {
					p.Enum = append(p.Enum, "") // left out or empty: the default
				}
			}
		}
		if names := sandbox.Names(); name == "backend" && len(names) > 0 {
			p.Description = "a backend by name: " + strings.Join(names, ", ") + "; empty lets execbox choose"
		}
	}
	return s
}

// apiProperty is what the API's document says of a field.
type apiProperty struct {
	Description string `yaml:"description"`
	Enum        []any  `yaml:"enum"`
}

// apiSchemas are the API document's component schemas: each one's
// properties by name.
var apiSchemas = sync.OnceValue(func() map[string]map[string]apiProperty {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]apiProperty `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(v1.OpenAPIYAML(), &doc); err != nil {
		panic("mcpserver: the API's document: " + err.Error())
	}
	out := map[string]map[string]apiProperty{}
	for name, s := range doc.Components.Schemas {
		out[name] = s.Properties
	}
	return out
})

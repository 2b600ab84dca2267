// Package strictjson refuses what encoding/json would quietly accept in a
// request: a key given twice in one object (encoding/json keeps the last),
// a key that names a struct field only when case is ignored, and nesting
// deeper than MaxDepth. The HTTP API checks every JSON body with it, and
// the MCP server every tool call's arguments, so both refuse the same.
// It is pure and safe for concurrent use.
package strictjson

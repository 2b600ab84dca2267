// Package wire converts between the API's wire types (api/v1) and the
// types of the packages behind it: the engine's reports, sessions,
// contexts and terminals, function requests and responses, tool results,
// audit records and guard approvals. It is the one place the two meet;
// the server and the CLI (which prints and sends the same shapes) use it.
//
// The rule: the wire carries the leaf packages' types as they are —
// sandbox (Limits, Usage, …) and event (Event, Caller), which import
// nothing of execbox — and mirrors every other one in a type of its own,
// converted here. A mirror encodes to exactly the JSON of the type it
// mirrors (wire_test.go holds each to it), so converting never changes
// the API.
package wire

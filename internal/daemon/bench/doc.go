// Package bench measures function calls side by side for `execbox bench`:
// every subject (bare exec on the host, each backend cold and warm,
// through the library and over HTTP, the peers' CLIs) is called in
// interleaved rounds so that drift falls on all alike, and the report is a
// terminal table, JSON, or an HTML page with an SVG chart. It holds no
// subject of its own: the command builds them.
package bench

// Package owner names the execbox process that made a sandbox's outside
// parts (a container, a Pod), so that a later execbox can remove what a
// dead one left and never what a live one holds.
package owner

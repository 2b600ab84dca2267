// Command execbox-init is the native backend's sandbox init as a small
// standalone binary: PID 1 of a sandbox's namespaces, which builds the
// sandbox's root, drops every privilege and runs the program (see package
// internal/host/nsinit). execbox starts it itself; it is not run by hand.
package main

import "github.com/execbox/execbox/internal/host/nsinit"

func main() { nsinit.Main() }

// Command execbox-guest is the init of an execbox microVM: the microvm
// backend puts it in the VM's initramfs as /init. It makes the sandbox
// inside the VM with the native backend. Build it static:
//
//	CGO_ENABLED=0 go build -o execbox-guest ./cmd/execbox-guest
package main

import (
	"github.com/execbox/execbox/backend/microvm/guest"
	"github.com/execbox/execbox/backend/native"
)

func main() { guest.Main(native.New) }

// Package all links every backend into a binary: import it for its side
// effect of registering them with the sandbox package.
package all

import (
	_ "github.com/execbox/execbox/backend/bwrap"
	_ "github.com/execbox/execbox/backend/docker"
	_ "github.com/execbox/execbox/backend/gvisor"
	_ "github.com/execbox/execbox/backend/kubernetes"
	_ "github.com/execbox/execbox/backend/local"
	_ "github.com/execbox/execbox/backend/microvm"
	_ "github.com/execbox/execbox/backend/native"
)

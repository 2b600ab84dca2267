package docker

import (
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

func TestSmoke(t *testing.T) {
	b := newBackend(t, Config{})
	res := testutil.Run(t, b, sandbox.Spec{}, "/usr/bin/env")
	t.Logf("%s\nartifacts %+v", describe(res), res.Artifacts)
}

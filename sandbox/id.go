package sandbox

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns a random 16-hex-digit identifier for a sandbox or a run.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

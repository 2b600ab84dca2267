package e2b

import (
	"encoding/json"
	"time"
)

// What the SDKs are told of every sandbox.
const (
	// EnvdVersion is the sandbox daemon's version the SDKs are told: the
	// features they gate on it (stdin and its close, optional users,
	// recursive watches) are served, the later ones they check for (file
	// metadata, octet-stream uploads) are refused by the SDK itself with
	// its own clear error.
	EnvdVersion = "0.5.2"
	// ClientID names this server in a sandbox's record.
	ClientID = "execbox"
	// DefaultTemplate is the SDKs' default template ("base"); every
	// template the server knows is listed by Templates.
	DefaultTemplate = "base"
	// CodeInterpreterTemplate is the code interpreter SDK's default.
	CodeInterpreterTemplate = "code-interpreter-v1"
)

// Headers of the in-sandbox calls.
const (
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	HeaderAccessToken = "X-Access-Token"
	// HeaderTrafficToken is what the code interpreter SDK sends on its
	// context calls, which carry no access token.
	HeaderTrafficToken = "E2b-Traffic-Access-Token"
	HeaderAPIKey       = "X-Api-Key"
	HeaderNextToken    = "X-Next-Token"
)

// Ports the SDKs address in a sandbox: the sandbox daemon's and the code
// interpreter's.
const (
	PortEnvd    = "49983"
	PortJupyter = "49999"
)

// NewSandbox is POST /sandboxes and /v2/sandboxes. Fields execbox cannot
// honour yet are kept raw, so that asking for one is refused, not ignored.
type NewSandbox struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int64            `json:"timeout,omitempty"` // seconds
	Metadata   map[string]string `json:"metadata,omitempty"`
	EnvVars    map[string]string `json:"envVars,omitempty"`
	AutoPause  *bool             `json:"autoPause,omitempty"`
	Secure     *bool             `json:"secure,omitempty"`
	// AllowInternetAccess: true (the service's default) is refused,
	// nothing or false is execbox's network none.
	AllowInternetAccess *bool           `json:"allow_internet_access,omitempty"`
	Network             json.RawMessage `json:"network,omitempty"`
	MCP                 json.RawMessage `json:"mcp,omitempty"`
	AutoPauseMemory     json.RawMessage `json:"autoPauseMemory,omitempty"`
	AutoResume          json.RawMessage `json:"autoResume,omitempty"`
	VolumeMounts        json.RawMessage `json:"volumeMounts,omitempty"`
	IAM                 json.RawMessage `json:"iam,omitempty"`
}

// Sandbox is the answer to a create or a connect.
type Sandbox struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string  `json:"trafficAccessToken,omitempty"`
	Domain             *string `json:"domain"`
}

// ListedSandbox is one sandbox of a list, and (with Detail's fields) the
// answer to GET /sandboxes/{id}.
type ListedSandbox struct {
	TemplateID   string            `json:"templateID"`
	Alias        string            `json:"alias,omitempty"`
	SandboxID    string            `json:"sandboxID"`
	ClientID     string            `json:"clientID"`
	StartedAt    time.Time         `json:"startedAt"`
	EndAt        time.Time         `json:"endAt"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int64             `json:"memoryMB"`
	DiskSizeMB   int64             `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []struct{}        `json:"volumeMounts"`
}

// Detail is GET /sandboxes/{id}.
type Detail struct {
	ListedSandbox
	EnvdAccessToken string  `json:"envdAccessToken,omitempty"`
	Domain          *string `json:"domain"`
}

// Timeout is POST /sandboxes/{id}/timeout and the body of a connect.
type Timeout struct {
	Timeout *int64 `json:"timeout,omitempty"` // seconds
}

// Error is the control API's error: the SDKs show its message.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// State of a listed sandbox.
const StateRunning = "running"

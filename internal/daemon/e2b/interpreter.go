package e2b

// The code interpreter's API (port 49999): POST /execute answers a stream
// of JSON lines; /contexts lists, makes, restarts and removes contexts.

// Execute is POST /execute.
type Execute struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id,omitempty"`
	Language  string            `json:"language,omitempty"`
	EnvVars   map[string]string `json:"env_vars,omitempty"`
}

// Output is one line of an execution's stream; Type says which fields
// are set.
type Output struct {
	Type string `json:"type"`
	// stdout, stderr, result
	Text string `json:"text,omitempty"`
	// result
	IsMainResult bool `json:"is_main_result,omitempty"`
	JSON         any  `json:"json,omitempty"`
	// error
	Name      string `json:"name,omitempty"`
	Value     string `json:"value,omitempty"`
	Traceback string `json:"traceback,omitempty"`
	// number_of_executions
	ExecutionCount int `json:"execution_count,omitempty"`
}

// Types of Output lines.
const (
	OutputStdout     = "stdout"
	OutputStderr     = "stderr"
	OutputResult     = "result"
	OutputError      = "error"
	OutputCount      = "number_of_executions"
	OutputEnd        = "end_of_execution"
	OutputUnexpected = "unexpected_end_of_execution"
)

// NewContext is POST /contexts.
type NewContext struct {
	Language string `json:"language,omitempty"`
	Cwd      string `json:"cwd,omitempty"`
}

// Context is a code context.
type Context struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

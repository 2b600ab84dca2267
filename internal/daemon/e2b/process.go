package e2b

import "encoding/json"

// The process.Process service of the sandbox daemon: its procedures and
// messages in their JSON form (lowerCamelCase names, bytes as base64).
const (
	ProcessService    = "/process.Process/"
	ProcessList       = ProcessService + "List"
	ProcessConnect    = ProcessService + "Connect"
	ProcessStart      = ProcessService + "Start"
	ProcessUpdate     = ProcessService + "Update"
	ProcessSendInput  = ProcessService + "SendInput"
	ProcessStream     = ProcessService + "StreamInput"
	ProcessSendSignal = ProcessService + "SendSignal"
	ProcessCloseStdin = ProcessService + "CloseStdin"
)

// PTY asks for a terminal of a size.
type PTY struct {
	Size *PTYSize `json:"size,omitempty"`
}

// PTYSize is a terminal's size.
type PTYSize struct {
	Cols uint32 `json:"cols"`
	Rows uint32 `json:"rows"`
}

// ProcessConfig is what a process runs.
type ProcessConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd,omitempty"`
}

// StartRequest starts a process; its answer is a stream of events.
type StartRequest struct {
	Process ProcessConfig `json:"process"`
	PTY     *PTY          `json:"pty,omitempty"`
	Tag     *string       `json:"tag,omitempty"`
	Stdin   *bool         `json:"stdin,omitempty"`
}

// ProcessSelector names a process by pid or tag.
type ProcessSelector struct {
	PID *uint32 `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

// ConnectRequest follows a running process's events.
type ConnectRequest struct {
	Process ProcessSelector `json:"process"`
}

// ProcessInfo is one process of a list.
type ProcessInfo struct {
	Config ProcessConfig `json:"config"`
	PID    uint32        `json:"pid"`
	Tag    *string       `json:"tag,omitempty"`
}

// ListResponse lists the running processes.
type ListResponse struct {
	Processes []ProcessInfo `json:"processes"`
}

// ProcessInput is input to a process: its stdin or its terminal.
type ProcessInput struct {
	Stdin []byte `json:"stdin,omitempty"`
	PTY   []byte `json:"pty,omitempty"`
}

// SendInputRequest sends input to a process.
type SendInputRequest struct {
	Process ProcessSelector `json:"process"`
	Input   ProcessInput    `json:"input"`
}

// StreamInputRequest is one message of a StreamInput stream: the first
// names the process, the others carry input; exactly one field is set.
type StreamInputRequest struct {
	Start *struct {
		Process ProcessSelector `json:"process"`
	} `json:"start,omitempty"`
	Data *struct {
		Input ProcessInput `json:"input"`
	} `json:"data,omitempty"`
	Keepalive *Empty `json:"keepalive,omitempty"`
}

// Signal is a signal the SDKs send.
type Signal int32

// The signals of the protocol.
const (
	SignalUnspecified Signal = 0
	SignalKill        Signal = 9
	SignalTerm        Signal = 15
)

var signalNames = map[string]int32{"SIGNAL_UNSPECIFIED": 0, "SIGNAL_SIGKILL": 9, "SIGNAL_SIGTERM": 15}

// UnmarshalJSON takes the enum's name or number.
func (s *Signal) UnmarshalJSON(b []byte) error {
	n, err := enum(b, signalNames)
	*s = Signal(n)
	return err
}

// SendSignalRequest signals a process.
type SendSignalRequest struct {
	Process ProcessSelector `json:"process"`
	Signal  Signal          `json:"signal"`
}

// CloseStdinRequest closes a process's stdin.
type CloseStdinRequest struct {
	Process ProcessSelector `json:"process"`
}

// UpdateRequest resizes a process's terminal.
type UpdateRequest struct {
	Process ProcessSelector `json:"process"`
	PTY     *PTY            `json:"pty,omitempty"`
}

// Empty is a message without fields (the answers of SendInput,
// SendSignal, CloseStdin and Update, the request of List).
type Empty struct{}

// ProcessEvent is one event of a process's stream: exactly one field is
// set.
type ProcessEvent struct {
	Start     *StartEvent `json:"start,omitempty"`
	Data      *DataEvent  `json:"data,omitempty"`
	End       *EndEvent   `json:"end,omitempty"`
	Keepalive *Empty      `json:"keepalive,omitempty"`
}

// StartEvent says the process started, and its pid.
type StartEvent struct {
	PID uint32 `json:"pid"`
}

// DataEvent is output: exactly one field is set.
type DataEvent struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	PTY    []byte `json:"pty,omitempty"`
}

// EndEvent says how the process ended.
type EndEvent struct {
	ExitCode int32   `json:"exitCode"`
	Exited   bool    `json:"exited"`
	Status   string  `json:"status"`
	Error    *string `json:"error,omitempty"`
}

// StreamEvent wraps an event in the answers of Start and Connect.
type StreamEvent struct {
	Event ProcessEvent `json:"event"`
}

var _ json.Unmarshaler = (*Signal)(nil)

package tool

// The stable codes of the errors Set's methods return (each with its kind).
const (
	CodeOptionsInvalid = "tool_options_invalid" // ErrInvalid: an Options or Call field is out of range
	CodeDirInvalid     = "tool_dir_invalid"     // ErrInvalid: a tools dir is not an absolute path to a directory
	CodeRuntimeUnsafe  = "tool_runtime_unsafe"  // ErrInvalid: the runtime dir is a symlink, not ours or writable by others
	CodeRuntimeFailed  = "tool_runtime_failed"  // ErrInternal: writing the runtime failed, or it was changed on disk
	CodeNotFound       = "tool_not_found"       // ErrNotFound: no tool of that name; nothing ran
	CodeToolInvalid    = "tool_invalid"         // ErrInvalid: the tool is a Problem (its module or spec is broken); nothing ran
	CodeArgsInvalid    = "tool_args_invalid"    // ErrInvalid: the arguments are not a JSON object or fail the schema; nothing ran
	CodeArgsTooLarge   = "tool_args_too_large"  // ErrLimit: the arguments exceed Options.MaxArgs; nothing ran
	CodeFilesInvalid   = "tool_files_invalid"   // ErrInvalid: Call.Files uses the reserved ArgsFile
	CodeOutputInvalid  = "tool_output_invalid"  // ErrInternal: the runtime's answer is absent, not one protocol document or over its bound
	CodeSandboxFailed  = "sandbox_failed"       // ErrInternal: the runtime exited non-zero, was signalled or the sandbox failed
	CodeTimeout        = "timeout"              // ErrLimit: the time limit passed; the process tree was killed
	CodeMemoryLimit    = "memory_limit"         // ErrLimit: the memory limit killed the run
	CodePidsLimit      = "pids_limit"           // ErrLimit: the process limit was hit
	CodeFileSizeLimit  = "file_size_limit"      // ErrLimit: a write passed the file-size limit
	CodeInterrupted    = "interrupted"          // ErrInternal: the caller cancelled
)

// The codes of a tool's own failure (Response.Error.Code) the runtime
// sets; a tool may raise execbox_tool.ToolError with any other.
const (
	CodeToolError       = "tool_error"       // the tool raised an exception
	CodeResultInvalid   = "result_invalid"   // the return value is not strict JSON
	CodeResultTooLarge  = "result_too_large" // the serialised return value exceeds MaxResult
	CodeNetworkDisabled = "network_disabled" // http_fetch under network none
)

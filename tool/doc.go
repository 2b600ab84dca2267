// Package tool discovers and runs tools inside sandboxes. A tool is a
// Python module with a spec — a name, a description and the JSON Schema
// of its arguments — and an execute function. execbox ships built-ins
// (python, read_file, write_file, http_fetch); the modules of configured
// tools dirs override them by name. Like package function, the package
// never chooses a backend: it hands a sandbox.Spec and a sandbox.Process to
// a RunFunc, which the engine supplies.
//
// # A tool module
//
// A file NAME.py at the top of a tools dir is the tool NAME (letters,
// digits, _ and -, at most 64; files starting with _ or . are not tools,
// so helpers can live beside them, loaded by path — a tools dir is not on
// sys.path). It defines
//
//	SPEC = {
//	    "name": "word_count",                    # must be the file's name
//	    "description": "Count the words of a text.",
//	    "parameters": {                          # JSON Schema of the arguments; an object
//	        "type": "object",
//	        "properties": {"text": {"type": "string"}},
//	        "required": ["text"],
//	    },
//	}
//
//	def execute(args, ctx):                      # args: the validated dict
//	    return {"words": len(args["text"].split())}  # anything JSON can hold
//
// "parameters" may be left out (then any object is accepted); other keys
// are refused. ctx (execbox_tool.Context) has name, source, tool_dir,
// work_dir (the sandbox's writable work dir, also the working directory)
// and network ("none" or "host"; network_allowed). A tool fails with a
// stable code of its own by raising execbox_tool.ToolError(code, message)
// (import execbox_tool: the runtime provides it, with open_file, which
// opens a work-dir path never following a symlink); any other exception is
// tool_error with its class, message and traceback.
//
// Overrides: the built-ins come first, then Options.Dirs in order; a later
// module replaces an earlier one of the same name. A module that fails to
// load, a malformed SPEC or a schema that does not resolve (checked on the
// host with github.com/google/jsonschema-go) is a Problem: the tool is
// left out of the Catalog — taking its name with it, so a broken override
// never silently falls back to the built-in — and Run refuses it with
// tool_invalid. One broken tool never fails the list.
//
// # Built-ins
//
//	python      {code}: run code in a fresh interpreter, REPL-style → {value, repr, type,
//	            stdout, stdout_truncated}: the last expression's value as JSON (left out
//	            when JSON cannot hold it), its repr and type, as a context call answers;
//	            nothing is kept between calls
//	read_file   {path, encoding?, max_bytes?} → {path, content, encoding, bytes, truncated}
//	write_file  {path, content, encoding?} → {path, bytes}; the file is an artifact
//	http_fetch  {url, method?, headers?, body?, max_bytes?, timeout?} → {url, status,
//	            headers, body, truncated}; network_disabled under network none
//
// Paths of read_file and write_file are relative to the work dir; "..",
// absolute paths and symlinks anywhere on the way are refused
// (path_invalid); file_not_found, not_a_file likewise.
//
// # In the sandbox
//
// The runtime (runtime/: entry.py, execbox_tool.py, tools/) is embedded
// and written once to Options.RuntimeDir/<content hash> (dirs 0755, files
// 0644, built in a temp dir and renamed into place, so concurrent Sets and
// versions never clash; an existing copy is checked byte for byte, and a
// runtime dir that is a symlink, not ours or writable by others is
// refused). Every sandbox mounts it read-only at /execbox/tool and the
// i-th tools dir read-only at /execbox/tools/i, and runs
//
//	python3 -I -B -X utf8 /execbox/tool/entry.py
//
// in the work dir, with EXECBOX_TOOL_ACTION=list|run, EXECBOX_TOOL_NAME,
// EXECBOX_TOOL_DIRS (the mounted dirs, colon-separated, in override
// order), EXECBOX_TOOL_NETWORK and the arguments: compact JSON in
// EXECBOX_TOOL_ARGS up to Options.ArgsMax bytes (60000), else in the
// work-dir file .execbox-tool-args.json named by EXECBOX_TOOL_ARGS_FILE
// (the runtime deletes it once read).
//
// The runtime's answer is the only thing on its stdout: it moves the
// original stdout to a private, non-inheritable fd and points fd 1 at
// stderr before any tool code runs, so what a tool (or its children)
// prints lands in Response.Output. The answer is one JSON document:
//
//	{"ok": true, "tools": [{name, description, parameters, source}…], "problems": […]}
//	{"ok": true, "result": …}
//	{"ok": false, "error": {"code", "type", "message", "traceback"}}   the tool failed
//	{"ok": false, "failure": {"code", "message"}}                      refused before the tool ran
//
// Set reads it strictly: unknown fields, a second document, an answer over
// 2 MiB or out of its bounds is ErrInternal tool_output_invalid, never a
// panic.
//
// # Invariants
//
//   - Nothing runs for a call that is refused: size (tool_args_too_large),
//     JSON object and schema (tool_args_invalid), name (tool_not_found,
//     tool_invalid) are checked on the host first.
//   - List and Run start a discovery sandbox only when the tools dirs
//     changed (names, sizes, modes, modification times of up to 10000
//     entries; more and every call rediscovers).
//   - The runtime and the tools dirs are read-only inside the sandbox.
//   - Bounds: arguments Options.MaxArgs (1 MiB), result MaxResult (1 MiB),
//     protocol output 2 MiB, Response.Output MaxOutput (64 KiB), 256 tools,
//     schema 64 KiB, message 4096 and traceback 16384 characters.
//   - Every run has a time limit (Call.Timeout, else Options.Timeout, 30 s)
//     enforced by the sandbox, with a backstop of 10 s more in the package.
//
// # Errors
//
// Run's errors are *sandbox.Error with the Code… constants: refusals
// before anything runs (above), then the end of a run that did not answer:
// timeout, memory_limit, pids_limit, file_size_limit (ErrLimit),
// interrupted, sandbox_failed, tool_output_invalid (ErrInternal); a
// RunFunc's own error comes back wrapped, its kind and code intact. A
// tool's own failure is not an error: Response.OK is false and
// Response.Error has the code (tool_error, result_invalid,
// result_too_large, network_disabled or the tool's ToolError code).
//
// # Concurrency
//
// A Set is safe for concurrent use. Runs proceed in parallel; one
// discovery runs at a time and the others wait for its result (or their
// context). New may run concurrently in several processes on one
// RuntimeDir.
package tool

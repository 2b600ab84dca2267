package sandbox

import (
	"slices"
	"strings"
)

// Language is a language execbox runs code in: where code given as a file
// goes and which interpreter takes it, as a file or inline. This is the
// one table of them: a run and a session exec take code in any; functions,
// interpreter contexts and warm pools only in a Runtime one (those have a
// function runner and a context kernel).
type Language struct {
	Name        string   // "python"
	File        string   // the file code goes in, in the work dir: "main.py"
	Interpreter []string // the argv before the file or the inline flag: python3 -B
	Inline      string   // the flag that takes code as an argument: "-c"
	Runtime     bool     // functions and contexts run in it
}

// DefaultLanguage is the language of code that names none.
const DefaultLanguage = "python"

var languages = []Language{
	{Name: "python", File: "main.py", Interpreter: []string{"python3", "-B"}, Inline: "-c", Runtime: true},
	{Name: "javascript", File: "main.js", Interpreter: []string{"node"}, Inline: "-e", Runtime: true},
	{Name: "sh", File: "main.sh", Interpreter: []string{"sh"}, Inline: "-c"},
	{Name: "bash", File: "main.sh", Interpreter: []string{"bash"}, Inline: "-c"},
}

// LookupLanguage returns the language named name ("" is DefaultLanguage).
func LookupLanguage(name string) (Language, bool) {
	if name == "" {
		name = DefaultLanguage
	}
	i := slices.IndexFunc(languages, func(l Language) bool { return l.Name == name })
	if i < 0 {
		return Language{}, false
	}
	l := languages[i]
	l.Interpreter = slices.Clone(l.Interpreter)
	return l, true
}

// Languages names the languages, those with Runtime only when runtime is
// true, in the table's order.
func Languages(runtime bool) []string {
	var out []string
	for _, l := range languages {
		if l.Runtime || !runtime {
			out = append(out, l.Name)
		}
	}
	return out
}

// LanguageList is Languages(runtime) for a message: "python, javascript".
func LanguageList(runtime bool) string { return strings.Join(Languages(runtime), ", ") }

// FileArgs is the argv that runs code written to l.File.
func (l Language) FileArgs() []string { return append(slices.Clone(l.Interpreter), l.File) }

// InlineArgs is the argv that runs code given as an argument; flags go
// between the interpreter and the inline flag (python3 -B -u -c code).
func (l Language) InlineArgs(code string, flags ...string) []string {
	return slices.Concat(l.Interpreter, flags, []string{l.Inline, code})
}

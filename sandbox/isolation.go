package sandbox

import "fmt"

// Isolation is how strongly a backend separates the program from the host,
// ordered weakest to strongest so that levels compare with < and >.
type Isolation int

const (
	IsolationNone    Isolation = iota // a plain host subprocess
	IsolationProcess                  // kernel namespaces on the host kernel
	IsolationKernel                   // a user-space kernel (gVisor)
	IsolationVM                       // a hardware virtual machine
)

var isolationNames = [...]string{"none", "process", "kernel", "vm"}

func (i Isolation) String() string {
	if i < 0 || int(i) >= len(isolationNames) {
		return fmt.Sprintf("isolation(%d)", int(i))
	}
	return isolationNames[i]
}

// ParseIsolation parses a level name as written by String.
func ParseIsolation(s string) (Isolation, error) {
	for i, n := range isolationNames {
		if n == s {
			return Isolation(i), nil
		}
	}
	return 0, Errorf(ErrInvalid, "isolation_invalid", "unknown isolation level %q (want none, process, kernel or vm)", s)
}

func (i Isolation) MarshalText() ([]byte, error) { return []byte(i.String()), nil }

func (i *Isolation) UnmarshalText(b []byte) error {
	v, err := ParseIsolation(string(b))
	if err != nil {
		return err
	}
	*i = v
	return nil
}

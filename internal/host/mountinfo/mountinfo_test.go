package mountinfo

import (
	"slices"
	"testing"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:         `/a/b`,
		`/a\040b`:      `/a b`,
		`/x\011y\134z`: "/x\ty\\z",
		`/short\04`:    `/short\04`,
		`/bad\0x9`:     `/bad\0x9`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// Lines with and without optional fields, escaped paths, and lines that
// are not mountinfo's.
func TestParse(t *testing.T) {
	got := Parse(`25 1 0:22 / /sys/fs/cgroup/memory rw,nosuid shared:9 - cgroup cgroup rw,memory
26 1 0:23 /sub /run/a\040b rw - tmpfs tmpfs rw,size=16k
short line
27 1 0:24 / /x rw shared:1 master:2 -
`)
	want := []Mount{
		{Root: "/", Point: "/sys/fs/cgroup/memory", FSType: "cgroup", Super: []string{"rw", "memory"}},
		{Root: "/sub", Point: "/run/a b", FSType: "tmpfs", Super: []string{"rw", "size=16k"}},
	}
	if !slices.EqualFunc(got, want, func(a, b Mount) bool {
		return a.Root == b.Root && a.Point == b.Point && a.FSType == b.FSType && slices.Equal(a.Super, b.Super)
	}) {
		t.Errorf("Parse = %+v, want %+v", got, want)
	}
}

// The calling process sees at least its root.
func TestReadSelf(t *testing.T) {
	all, err := Read(Self)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(all, func(m Mount) bool { return m.Point == "/" }) {
		t.Errorf("no mount at / in %s: %+v", Self, all)
	}
}

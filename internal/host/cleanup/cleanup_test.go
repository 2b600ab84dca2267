package cleanup

import (
	"slices"
	"testing"
)

func TestCleanRunsNewestFirstOnce(t *testing.T) {
	var got []int
	cu := Make(func() { got = append(got, 1) })
	cu.Add(nil)
	cu.Add(func() { got = append(got, 2) })
	cu.Add(func() { got = append(got, 3) })
	cu.Clean()
	cu.Clean()
	if !slices.Equal(got, []int{3, 2, 1}) {
		t.Fatalf("ran %v, want [3 2 1] once", got)
	}
}

func TestReleaseKeepsAndHandsOver(t *testing.T) {
	var got []int
	setup := func(fail bool) (undo func()) {
		cu := Make(func() { got = append(got, 1) })
		defer cu.Clean()
		cu.Add(func() { got = append(got, 2) })
		if fail {
			return nil
		}
		return cu.Release()
	}
	undo := setup(false)
	if len(got) != 0 {
		t.Fatalf("a released Cleanup ran %v", got)
	}
	undo()
	if !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("the released func ran %v, want [2 1]", got)
	}
	got = nil
	setup(true)
	if !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("a failed setup ran %v, want [2 1]", got)
	}
}

func TestZeroValue(t *testing.T) {
	var cu Cleanup
	cu.Clean()
	cu.Release()()
	ran := false
	cu.Add(func() { ran = true })
	cu.Clean()
	if !ran {
		t.Fatal("the zero Cleanup did not run what was added")
	}
}

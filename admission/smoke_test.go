package admission

import "testing"

func TestSmoke(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}))
	a, b, c := job("a", "a", 0, 1, 1, 4), job("b", "a", 0, 2, 1, 4), job("c", "a", 0, 3, 1, 4)
	mustWL(t, e, a, b, c)
	r := cycle(t, e)
	t.Log(fmtResult(r))
	confirm(t, e, specMap(a, b, c), r)
	r = cycle(t, e)
	t.Log(fmtResult(r))
	e.DeleteWorkload(key("a"))
	r = cycle(t, e)
	t.Log(fmtResult(r))
	if err := e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

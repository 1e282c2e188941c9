package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRenderSlackMessage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "message.png")
	if err := run(filepath.Join("..", "..", "..", "controllers", "notify", "testdata", "slack-oomkilled.json"), out); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Fatalf("no PNG written: %v", err)
	}
}

func TestRenderWrapsAndGrows(t *testing.T) {
	short := message{Blocks: []block{{Type: "header", Text: &text{Text: "one line"}}}}
	long := message{Blocks: []block{{Type: "section", Text: &text{Text: "a long paragraph that cannot fit on one line of a card this wide, so it must wrap onto a second and a third line " +
		"and more, which makes the card taller than one with a single short header line on it"}}}}
	a, err := Render(short)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(long)
	if err != nil {
		t.Fatal(err)
	}
	if a.Bounds().Dx() != width || b.Bounds().Dy() <= a.Bounds().Dy() {
		t.Errorf("sizes %v and %v: want width %d and the wrapped text taller", a.Bounds(), b.Bounds(), width)
	}
	inked := false
	for x := margin; x < width-margin && !inked; x++ {
		for y := 0; y < a.Bounds().Dy(); y++ {
			if r, _, _, _ := a.At(x, y).RGBA(); r < 0x8000 {
				inked = true
				break
			}
		}
	}
	if !inked {
		t.Errorf("nothing drawn: the header is missing")
	}
}

// Command blockkit renders a Slack Block Kit message — the payload berth
// posts for a failure report — as a PNG, roughly as Slack shows it, for the
// documentation: go run . -in payload.json -out message.png
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/gomono"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// message is the part of a Block Kit message the renderer draws.
type message struct {
	Blocks []block `json:"blocks"`
}

type block struct {
	Type     string `json:"type"`
	Text     *text  `json:"text"`
	Fields   []text `json:"fields"`
	Elements []text `json:"elements"`
}

type text struct {
	Text string `json:"text"`
}

// Layout, in pixels.
const (
	width   = 760
	margin  = 24
	columns = 2
)

// faces are the fonts of the rendering.
type faces struct{ header, bold, regular, mono, small font.Face }

func main() {
	in := flag.String("in", "", "Block Kit JSON (a WebhookMessage)")
	out := flag.String("out", "", "PNG to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "blockkit:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("reading the message: %w", err)
	}
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("decoding %s: %w", in, err)
	}
	img, err := Render(m)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return fmt.Errorf("encoding %s: %w", out, err)
	}
	return f.Close()
}

func loadFaces() (faces, error) {
	face := func(ttf []byte, size float64) (font.Face, error) {
		f, err := opentype.Parse(ttf)
		if err != nil {
			return nil, fmt.Errorf("parsing a Go font: %w", err)
		}
		return opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
	}
	var fs faces
	var err error
	for _, x := range []struct {
		dst  *font.Face
		ttf  []byte
		size float64
	}{{&fs.header, gobold.TTF, 20}, {&fs.bold, gobold.TTF, 14}, {&fs.regular, goregular.TTF, 14},
		{&fs.mono, gomono.TTF, 12}, {&fs.small, goregular.TTF, 12}} {
		if *x.dst, err = face(x.ttf, x.size); err != nil {
			return fs, err
		}
	}
	return fs, nil
}

// Render draws the message on a white card, one block under another.
func Render(m message) (image.Image, error) {
	fs, err := loadFaces()
	if err != nil {
		return nil, err
	}
	// Draw twice: once to measure the height, once on a canvas of that
	// height.
	c := &canvas{faces: fs}
	c.blocks(m.Blocks)
	c.img = image.NewRGBA(image.Rect(0, 0, width, c.y+margin))
	draw.Draw(c.img, c.img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.Draw(c.img, image.Rect(0, 0, 6, c.img.Bounds().Dy()), image.NewUniform(color.RGBA{0xE0, 0x1E, 0x5A, 0xFF}), image.Point{}, draw.Src)
	c.y = 0
	c.blocks(m.Blocks)
	return c.img, nil
}

// canvas draws text top to bottom; with img nil it only measures.
type canvas struct {
	faces
	img *image.RGBA
	y   int
}

var (
	ink   = color.RGBA{0x1D, 0x1C, 0x1D, 0xFF}
	muted = color.RGBA{0x61, 0x60, 0x61, 0xFF}
	code  = color.RGBA{0xF8, 0xF8, 0xF8, 0xFF}
	rule  = color.RGBA{0xDD, 0xDD, 0xDD, 0xFF}
)

func (c *canvas) blocks(bs []block) {
	c.y = margin
	for _, b := range bs {
		switch b.Type {
		case "header":
			c.paragraph(b.Text.Text, c.header, ink, margin, width-2*margin)
		case "section":
			c.section(b)
		case "divider":
			c.fill(image.Rect(margin, c.y, width-margin, c.y+1), rule)
			c.y += 10
		case "context":
			for _, e := range b.Elements {
				c.paragraph(strings.Trim(e.Text, "`"), c.mono, muted, margin, width-2*margin)
			}
		}
		c.y += 8
	}
}

// section draws a section's fields in two columns, then its text; a
// ``` code block is drawn on grey.
func (c *canvas) section(b block) {
	colWidth := (width - 2*margin) / columns
	for i := 0; i < len(b.Fields); i += columns {
		top, bottom := c.y, c.y
		for j := 0; j < columns && i+j < len(b.Fields); j++ {
			c.y = top
			label, value, _ := strings.Cut(b.Fields[i+j].Text, "\n")
			x := margin + j*colWidth
			c.paragraph(strings.Trim(label, "*"), c.bold, ink, x, colWidth-12)
			c.paragraph(value, c.regular, ink, x, colWidth-12)
			bottom = max(bottom, c.y)
		}
		c.y = bottom + 6
	}
	if b.Text == nil {
		return
	}
	head, rest, isCode := strings.Cut(b.Text.Text, "```")
	for _, line := range strings.Split(strings.TrimRight(head, "\n"), "\n") {
		face := c.regular
		if strings.HasPrefix(line, "*") && strings.HasSuffix(line, "*") {
			face, line = c.bold, strings.Trim(line, "*")
		}
		c.paragraph(strings.ReplaceAll(line, "`", ""), face, ink, margin, width-2*margin)
	}
	if isCode {
		body := strings.TrimSuffix(rest, "```")
		top := c.y
		c.y += 8
		mark := c.y
		for _, line := range strings.Split(body, "\n") {
			c.paragraph(line, c.mono, ink, margin+10, width-2*margin-20)
		}
		c.fill(image.Rect(margin, top, width-margin, c.y+8), code)
		c.y = mark
		for _, line := range strings.Split(body, "\n") {
			c.paragraph(line, c.mono, ink, margin+10, width-2*margin-20)
		}
		c.y += 8
	}
}

// paragraph draws s wrapped at maxWidth from x, and moves down.
func (c *canvas) paragraph(s string, face font.Face, col color.Color, x, maxWidth int) {
	lineHeight := face.Metrics().Height.Ceil() + 4
	for _, line := range wrap(s, face, maxWidth) {
		c.y += lineHeight
		if c.img != nil {
			d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: face,
				Dot: fixed.P(x, c.y-face.Metrics().Descent.Ceil())}
			d.DrawString(line)
		}
	}
}

func (c *canvas) fill(r image.Rectangle, col color.Color) {
	if c.img != nil {
		draw.Draw(c.img, r, image.NewUniform(col), image.Point{}, draw.Src)
	}
}

// wrap breaks s into lines no wider than maxWidth in face, at spaces.
func wrap(s string, face font.Face, maxWidth int) []string {
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			try := strings.TrimSpace(line + " " + word)
			if line != "" && font.MeasureString(face, try).Ceil() > maxWidth {
				lines = append(lines, line)
				try = word
			}
			line = try
		}
		lines = append(lines, line)
	}
	return lines
}

package plot_test

import (
	"bytes"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/berth-dev/berth/cmd/internal/sim/plot"
)

// ExampleUtilization draws one policy's GPU use, sampled every 30 minutes,
// as an SVG panel.
func ExampleUtilization() {
	at := func(i int) time.Duration { return time.Duration(i) * 30 * time.Minute }
	var busy, idle, partial plot.Series
	for i, v := range []float64{0, 32, 64, 64, 48} {
		busy.Points = append(busy.Points, plot.Point{At: at(i), Value: v})
		idle.Points = append(idle.Points, plot.Point{At: at(i), Value: 64 - v})
		partial.Points = append(partial.Points, plot.Point{At: at(i), Value: 0})
	}
	usages := []plot.Usage{{Policy: "berth", Busy: busy, Idle: idle, Partial: partial}}

	var buf bytes.Buffer
	if err := plot.Utilization(&buf, "svg", "GPU use", usages); err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Contains(buf.String(), "<svg"))
	// Output: true
}

package simulation

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// WriteSVG draws two bar charts side by side: safety violations per run
// (stale writes, lost updates, double executions, on a log scale) and
// partition-seconds unowned per run, one group of bars per strategy.
func WriteSVG(w io.Writer, totals []*Totals) error {
	const (
		width, height = 900, 360
		top, bottom   = 50, 300
		panelW        = 400
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	colors := []string{"#d62728", "#ff7f0e", "#9467bd"}
	series := []string{"stale writes accepted", "lost updates", "double executions"}
	per := func(v float64, t *Totals) float64 {
		if t.Runs == 0 {
			return 0
		}
		return v / float64(t.Runs)
	}
	// Panel 1: violations per run, log10(1+x).
	maxV := 1.0
	for _, t := range totals {
		for _, v := range []float64{per(float64(t.StaleWritesAccepted), t), per(float64(t.LostUpdates), t), per(float64(t.DoubleExecutions), t)} {
			maxV = math.Max(maxV, math.Log10(1+v))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="25" font-size="14">Safety violations per run (log scale)</text>`+"\n", 40)
	gw := float64(panelW-40) / float64(len(totals))
	for i, t := range totals {
		vals := []float64{per(float64(t.StaleWritesAccepted), t), per(float64(t.LostUpdates), t), per(float64(t.DoubleExecutions), t)}
		for j, v := range vals {
			h := math.Log10(1+v) / maxV * (bottom - top)
			x := 40 + float64(i)*gw + float64(j)*gw/4 + gw/8
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.2f per run</title></rect>`+"\n",
				x, bottom-h, gw/4-2, h, colors[j], t.Strategy, series[j], v)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="9" text-anchor="middle">%s</text>`+"\n", x+gw/8-1, bottom-h-3, fmtNum(v))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", 40+float64(i)*gw+gw/2, bottom+16, t.Strategy)
	}
	fmt.Fprintf(&b, `<line x1="40" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", bottom, panelW, bottom)
	for j, s := range series {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", 40+j*130, bottom+30, colors[j], 54+j*130, bottom+39, s)
	}
	// Panel 2: unavailability per run.
	x0 := float64(panelW + 80)
	maxU := 0.001
	for _, t := range totals {
		if t.live {
			maxU = math.Max(maxU, per(t.UnownedSeconds, t))
		}
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="25" font-size="14">Partition-seconds unowned per run</text>`+"\n", x0)
	for i, t := range totals {
		x := x0 + float64(i)*gw + gw/4
		label := "n/a"
		if t.live {
			v := per(t.UnownedSeconds, t)
			h := v / maxU * (bottom - top)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#1f77b4"><title>%s: %.2f</title></rect>`+"\n", x, bottom-h, gw/2, h, t.Strategy, v)
			label = fmtNum(v)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="9" text-anchor="middle">%s</text>`+"\n", x+gw/4, bottom-h-3, label)
		} else {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="9" text-anchor="middle">per-op lock</text>`+"\n", x+gw/4, bottom-3)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x+gw/4, bottom+16, t.Strategy)
	}
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0, bottom, width-20, bottom)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtNum(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

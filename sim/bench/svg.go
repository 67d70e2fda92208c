package bench

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
)

// WriteSVG plots every row's ratio as a horizontal bar on a log scale, one
// block per section, the reference (1x) marked by a vertical line.
func WriteSVG(w io.Writer, rep *Report) error {
	const (
		width    = 980
		labelW   = 470
		barW     = width - labelW - 90
		rowH     = 18
		headH    = 26
		minRatio = 1.0 / 64
		maxRatio = 4096.0
	)
	height := 40
	for _, s := range rep.Sections {
		height += headH + rowH*len(s.Rows) + 8
	}
	x := func(r float64) float64 {
		r = math.Min(math.Max(r, minRatio), maxRatio)
		return labelW + barW*(math.Log2(r)-math.Log2(minRatio))/(math.Log2(maxRatio)-math.Log2(minRatio))
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(bw, `<text x="8" y="18" font-size="14" font-weight="bold">tenure vs baselines: ratio of medians to each table's reference (log scale; 1x = reference)</text>`+"\n")
	y := 40
	one := x(1)
	for _, s := range rep.Sections {
		rh := s.RatioHeader
		if rh == "" {
			rh = "x " + shortName(s.Rows[0].Name)
		}
		fmt.Fprintf(bw, `<text x="8" y="%d" font-weight="bold">%s (%s)</text>`+"\n", y+16, html.EscapeString(s.Title), html.EscapeString(rh))
		y += headH
		for i, r := range s.Rows {
			fill := "#4a7ab5"
			if i == 0 && s.RatioHeader == "" {
				fill = "#2e8b57"
			}
			fmt.Fprintf(bw, `<text x="12" y="%d">%s</text>`+"\n", y+13, html.EscapeString(trim(r.Name, 78)))
			x0, x1 := math.Min(one, x(r.Ratio)), math.Max(one, x(r.Ratio))
			if r.Ratio <= 0 {
				x0, x1 = labelW, labelW
			}
			fmt.Fprintf(bw, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y+3, math.Max(x1-x0, 1), rowH-6, fill)
			fmt.Fprintf(bw, `<text x="%.1f" y="%d">%s</text>`+"\n", x1+4, y+13, ratioText(r.Ratio))
			y += rowH
		}
		fmt.Fprintf(bw, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black"/>`+"\n", one, one, y-rowH*len(s.Rows), y)
		y += 8
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

func trim(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

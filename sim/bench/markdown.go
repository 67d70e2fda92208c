package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// WriteMarkdown writes rep as markdown: a header line with the run's
// circumstances, then one table per section.
func WriteMarkdown(w io.Writer, rep *Report) error {
	bw := bufio.NewWriter(w)
	if rep.Command != "" {
		fmt.Fprintf(bw, "`%s`: ", rep.Command)
	}
	mode := ""
	if rep.Quick {
		mode = " (quick)"
	}
	fmt.Fprintf(bw, "run%s of %s, wall time %v, %d CPUs, load average %s at the start and %s at the end; %d rounds per comparison (each table gives its own count), implementations interleaved; values are medians of the rounds.\n",
		mode, rep.Start.Format("2006-01-02 15:04 UTC"), rep.Wall.Round(100*time.Millisecond), rep.CPUs, load(rep.LoadStart), load(rep.LoadEnd), rep.Rounds)
	for _, s := range rep.Sections {
		fmt.Fprintf(bw, "\n### %s\n\n", s.Title)
		if s.Intro != "" {
			fmt.Fprintf(bw, "%s\n\n", s.Intro)
		}
		rh := s.RatioHeader
		if rh == "" {
			rh = "x " + shortName(s.Rows[0].Name)
		}
		allocs, spread := false, false
		for _, r := range s.Rows {
			allocs = allocs || r.Allocs >= 0
			spread = spread || r.Max > 0
		}
		fmt.Fprintf(bw, "| implementation | %s |", s.Unit)
		if allocs {
			bw.WriteString(" allocs/op |")
		}
		fmt.Fprintf(bw, " %s | rounds |", rh)
		if spread {
			bw.WriteString(" range of rounds |")
		}
		bw.WriteString(" note |\n|---|---:|")
		if allocs {
			bw.WriteString("---:|")
		}
		bw.WriteString("---:|---:|")
		if spread {
			bw.WriteString("---:|")
		}
		bw.WriteString("---|\n")
		for _, r := range s.Rows {
			fmt.Fprintf(bw, "| %s | %s |", r.Name, num(r.Value))
			if allocs {
				if r.Allocs >= 0 {
					fmt.Fprintf(bw, " %s |", num(r.Allocs))
				} else {
					bw.WriteString(" |")
				}
			}
			n := "computed"
			if r.Samples > 0 {
				n = fmt.Sprint(r.Samples)
			}
			fmt.Fprintf(bw, " %s | %s |", ratioText(r.Ratio), n)
			if spread {
				if r.Max > 0 {
					fmt.Fprintf(bw, " %s–%s |", num(r.Min), num(r.Max))
				} else {
					bw.WriteString(" |")
				}
			}
			fmt.Fprintf(bw, " %s |\n", r.Note)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(bw, "\n%s\n", n)
		}
	}
	return bw.Flush()
}

// shortName is a row name up to its first parenthesis or colon.
func shortName(s string) string {
	if i := strings.IndexAny(s, "(:"); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func load(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

// num formats a figure with about three significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "n/a"
	case a == 0:
		return "0"
	case a >= 1000:
		return addCommas(fmt.Sprintf("%.0f", v))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func ratioText(r float64) string {
	if r >= 100 {
		return addCommas(fmt.Sprintf("%.0f", r)) + "x"
	}
	if r >= 10 {
		return fmt.Sprintf("%.1fx", r)
	}
	return fmt.Sprintf("%.2fx", r)
}

func addCommas(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

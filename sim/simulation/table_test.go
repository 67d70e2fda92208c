package simulation

import (
	"strings"
	"testing"
	"time"
)

func TestWriteMarkdownAndSVG(t *testing.T) {
	totals := []*Totals{
		{Strategy: Tenure, Runs: 2, Operations: 100, UnownedSeconds: 3, live: true,
			Failovers: []time.Duration{time.Second, 2 * time.Second}},
		{Strategy: RedisLock, Runs: 2, Operations: 90, StaleWritesAccepted: 3, LostUpdates: 7, DoubleExecutions: 1, FailedRuns: 2},
	}
	var md, svg strings.Builder
	if err := WriteMarkdown(&md, totals); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| tenure | 2 | 100 | 0 | 0 | 0 |", "| redislock | 2 | 90 | 3 | 7 | 1 |", "n/a"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if err := WriteSVG(&svg, totals); err != nil {
		t.Fatal(err)
	}
	s := svg.String()
	if !strings.HasPrefix(s, "<svg") || !strings.HasSuffix(s, "</svg>\n") || !strings.Contains(s, "redislock") {
		t.Errorf("not an SVG of both strategies:\n%s", s)
	}
	if v := totals[1].Violations(); v != 11 {
		t.Errorf("violations %d, want 11", v)
	}
}

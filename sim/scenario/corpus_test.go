package scenario

import (
	"strings"
	"testing"
)

// TestCorpus: every scenario is caught with its protection off and passes
// with it on.
func TestCorpus(t *testing.T) {
	for _, s := range Corpus() {
		t.Run(s.Name, func(t *testing.T) {
			off, err := s.Run(false)
			if err != nil {
				t.Fatalf("protection off: %v", err)
			}
			if !off.Caught() {
				t.Errorf("protection off: not caught (%s)", strings.Join(off.Notes, "; "))
			}
			on, err := s.Run(true)
			if err != nil {
				t.Fatalf("protection on: %v", err)
			}
			if on.Caught() {
				var vs []string
				if on.Report != nil {
					vs = on.Report.Violations()
				}
				t.Errorf("protection on: caught (%s; panic %q): %s", strings.Join(on.Notes, "; "), on.Panic, strings.Join(vs, "\n"))
			}
			t.Logf("off: %s (%s) | on: %s", verdict(off), strings.Join(off.Notes, "; "), strings.Join(on.Notes, "; "))
		})
	}
}

package scenario

import (
	"fmt"
	"io"
	"strings"
)

// verdict summarizes what an outcome found.
func verdict(o Outcome) string {
	var parts []string
	if o.Panic != "" {
		parts = append(parts, "panic: "+o.Panic)
	}
	if o.Report != nil {
		s := o.Report.Summary()
		if s.StaleWritesAccepted > 0 {
			parts = append(parts, fmt.Sprintf("%d stale writes", s.StaleWritesAccepted))
		}
		if s.LostUpdates > 0 {
			parts = append(parts, fmt.Sprintf("%d lost updates", s.LostUpdates))
		}
		if s.DoubleExecutions > 0 {
			parts = append(parts, fmt.Sprintf("%d double executions", s.DoubleExecutions))
		}
		if s.EpochRegressions > 0 {
			parts = append(parts, fmt.Sprintf("%d epoch regressions", s.EpochRegressions))
		}
		if s.Linearizable == "no" {
			parts = append(parts, "not linearizable")
		}
	}
	if len(parts) == 0 {
		return "clean"
	}
	return strings.Join(parts, ", ")
}

// WriteMarkdown runs the corpus and writes its table: what each scenario's
// replay found with the protection off and on.
func WriteMarkdown(w io.Writer) (ok bool, err error) {
	ok = true
	var b strings.Builder
	b.WriteString("| scenario | known failure | protection off | protection on | result |\n|---|---|---|---|---|\n")
	for _, s := range Corpus() {
		off, err := s.Run(false)
		if err != nil {
			return false, fmt.Errorf("%s off: %w", s.Name, err)
		}
		on, err := s.Run(true)
		if err != nil {
			return false, fmt.Errorf("%s on: %w", s.Name, err)
		}
		res := "caught off, passes on"
		if !off.Caught() || on.Caught() {
			res, ok = "FAIL", false
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", s.Name, s.Ref, verdict(off), verdict(on), res)
	}
	_, err = io.WriteString(w, b.String())
	return ok, err
}

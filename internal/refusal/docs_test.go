package refusal_test

import (
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
)

// The README's refusal table and fence/httpfence's table of statuses show
// the refusal table as it is: a row per kind, with its status, gRPC code
// and kind, retryability and hint.
func TestDocsShowTheTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	httpDoc, err := os.ReadFile("../../fence/httpfence/doc.go")
	require.NoError(t, err)
	for _, row := range refusal.Rows() {
		status := strconv.Itoa(row.Status) + " " + http.StatusText(row.Status)

		cells := readmeRow(string(readme), row.Kind)
		require.Len(t, cells, 5, "README has no refusal table row for %q", row.Kind)
		assert.Equal(t, status, cells[1], row.Kind)
		if row.Proto == tenurepb.Refusal_KIND_UNSPECIFIED {
			assert.Equal(t, "none: HTTP only", cells[2], row.Kind)
		} else {
			assert.Equal(t, row.Code.String()+", `"+row.Proto.String()+"`", cells[2], row.Kind)
		}
		assert.Equal(t, map[bool]string{true: "yes", false: "no"}[row.Retryable], cells[3], row.Kind)
		assert.Equal(t, row.Route == refusal.NoRoute, cells[4] == "none", "%s: hint %q", row.Kind, cells[4])
		assert.Equal(t, row.Token, strings.Contains(cells[4], "token"), "%s: hint %q", row.Kind, cells[4])

		word := regexp.MustCompile(`(?m)^//\t` + regexp.QuoteMeta(status) + ` .*(\s|,)` + regexp.QuoteMeta(string(row.Kind)) + `[\s,:]`)
		assert.Regexp(t, word, string(httpDoc), "fence/httpfence/doc.go has no %s line for %q", status, row.Kind)
	}
}

// readmeRow returns the cells of the README table's row of kind k, nil if
// there is none: its first cell starts with the kind's word in backquotes.
func readmeRow(readme string, k refusal.Kind) []string {
	for line := range strings.Lines(readme) {
		if !strings.HasPrefix(line, "| `"+string(k)+"`") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		return cells
	}
	return nil
}

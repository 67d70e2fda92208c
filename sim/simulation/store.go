package simulation

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tenure-go/tenure/sim/check"
)

// counter is a counter's stored value: its count, the write that wrote it
// (so the store's log names its writes) and the idempotency keys applied.
type counter struct {
	N     int64
	Write check.WriteID
	Idem  []string
}

func (c counter) has(idem string) bool { return slices.Contains(c.Idem, idem) }

func (c counter) encode() string {
	return strconv.FormatInt(c.N, 10) + "|" + strconv.FormatUint(uint64(c.Write), 10) + "|" + strings.Join(c.Idem, ",")
}

func decodeCounter(s string) counter {
	if s == "" {
		return counter{}
	}
	parts := strings.SplitN(s, "|", 3)
	var c counter
	c.N, _ = strconv.ParseInt(parts[0], 10, 64)
	if len(parts) > 1 {
		w, _ := strconv.ParseUint(parts[1], 10, 64)
		c.Write = check.WriteID(w)
	}
	if len(parts) > 2 && parts[2] != "" {
		c.Idem = strings.Split(parts[2], ",")
	}
	return c
}

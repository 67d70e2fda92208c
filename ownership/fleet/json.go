package fleet

import (
	"encoding/json"
	"math"
	"time"
)

// Seconds is a duration of a report that JSON gives as a number of
// seconds, as every report of the package (and tenurectl's --json) gives
// its durations, under keys that end in _seconds. A negative Seconds means
// unknown and is -1 in JSON. time.Duration(s) converts it.
type Seconds time.Duration

// MarshalJSON encodes s as a number of seconds, -1 if s is negative.
func (s Seconds) MarshalJSON() ([]byte, error) {
	if s < 0 {
		return []byte("-1"), nil
	}
	return json.Marshal(time.Duration(s).Seconds())
}

// UnmarshalJSON decodes MarshalJSON's form: a negative number is -1
// (unknown), one beyond the longest Duration is the longest.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	switch {
	case f < 0:
		*s = -1
	case f >= float64(math.MaxInt64)/float64(time.Second):
		*s = math.MaxInt64
	default:
		*s = Seconds(f * float64(time.Second))
	}
	return nil
}

// seconds returns s seconds as Seconds: 0 for a value that is not
// positive (NaN included), the longest Duration for one beyond it.
func seconds(s float64) Seconds {
	switch {
	case !(s > 0):
		return 0
	case s >= float64(math.MaxInt64)/float64(time.Second):
		return math.MaxInt64
	}
	return Seconds(s * float64(time.Second))
}

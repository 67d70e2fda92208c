package fleetview

import (
	"fmt"
	"strings"

	"github.com/tenure-go/tenure/ownership/ring"
)

// FeatureError returns the refusal of feature, wrapping
// ring.ErrFeatureUnsupported: members are the IDs of the live members
// whose builds lack it, sorted, or none when the build that lacks it is
// the caller's own (a node refused at Join).
func FeatureError(feature string, members []string) error {
	if len(members) == 0 {
		return fmt.Errorf("%w: the fleet uses protocol feature %q, which this build does not understand (run a newer build)",
			ring.ErrFeatureUnsupported, feature)
	}
	return fmt.Errorf("%w: protocol feature %q is not understood by member(s) %s (upgrade them, or wait until they leave)",
		ring.ErrFeatureUnsupported, feature, strings.Join(members, ", "))
}

package httpfence

// FromHeader and SignatureFromHeader expose the Handler's readers of the
// headers to the tests.
var (
	FromHeader          = fromHeader
	SignatureFromHeader = signatureFromHeader
)

// Status returns the HTTP status WriteRefusal answers r with.
func Status(r *Refusal) int { return r.status() }

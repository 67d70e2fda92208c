package fence

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// errMalformed is the error of a string that ParseToken cannot read.
var errMalformed = fmt.Errorf("%w: malformed", ErrInvalidToken)

// MaxScopeLen is the longest scope a token may carry, in bytes.
const MaxScopeLen = 512

// Token is a fencing token: the scope it fences and the epoch at which its
// holder's tenure began. The zero Token is invalid. Token is a small value
// type, safe to copy and to share between goroutines.
type Token struct {
	// Scope names what the token fences, such as "p/17" or "leader/billing".
	Scope string
	// Epoch is the etcd revision at which the holder's claim was created.
	// Epochs of successive holders of one scope strictly increase.
	Epoch int64
}

// Validate reports whether t can be presented to a store: its scope must be
// non-empty, at most MaxScopeLen bytes of valid UTF-8 without control
// characters, and its epoch positive. The error wraps ErrInvalidToken.
func (t Token) Validate() error {
	if p := t.problem(); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidToken, p)
	}
	return nil
}

// problem says what makes t invalid, "" if nothing does.
func (t Token) problem() string {
	if p := scopeProblem(t.Scope); p != "" {
		return p
	}
	if t.Epoch <= 0 {
		return fmt.Sprintf("epoch %d for scope %q must be positive", t.Epoch, t.Scope)
	}
	return ""
}

// ValidateScope reports whether s is a valid scope: non-empty, at most
// MaxScopeLen bytes of valid UTF-8 and free of control characters and spaces.
// The error wraps ErrInvalidToken.
func ValidateScope(s string) error {
	if p := scopeProblem(s); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidToken, p)
	}
	return nil
}

// scopeProblem says what makes s an invalid scope, "" if nothing does.
func scopeProblem(s string) string {
	switch {
	case s == "":
		return "empty scope"
	case len(s) > MaxScopeLen:
		return fmt.Sprintf("scope of %d bytes exceeds %d", len(s), MaxScopeLen)
	case !utf8.ValidString(s):
		return fmt.Sprintf("scope %q is not valid UTF-8", s)
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return fmt.Sprintf("scope %q contains a control or space character", s)
		}
	}
	return ""
}

// String returns the token's text form, "<scope>@<epoch>", which ParseToken
// reads back. The scope may itself contain '@': the epoch follows the last one.
func (t Token) String() string {
	return t.Scope + "@" + strconv.FormatInt(t.Epoch, 10)
}

// ParseToken reads the text form written by Token.String and validates the
// result. Malformed input yields an error wrapping ErrInvalidToken.
func ParseToken(s string) (Token, error) {
	i := strings.LastIndexByte(s, '@')
	if i < 0 {
		return Token{}, fmt.Errorf("%w: %q has no '@' before the epoch", errMalformed, s)
	}
	digits := s[i+1:]
	// Only canonical decimal: no sign, no leading zeros, so that String and
	// ParseToken round-trip exactly.
	if digits == "" || digits[0] == '0' || strings.TrimLeft(digits, "0123456789") != "" {
		return Token{}, fmt.Errorf("%w: %q: epoch %q is not a positive decimal integer", errMalformed, s, digits)
	}
	epoch, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %q: epoch %q out of range", errMalformed, s, digits)
	}
	t := Token{Scope: s[:i], Epoch: epoch}
	if p := t.problem(); p != "" {
		return Token{}, fmt.Errorf("%w: %q: %s", errMalformed, s, p)
	}
	return t, nil
}

// Compare orders tokens of the same scope by epoch: it returns -1 if t is
// older than u, +1 if newer and 0 if both carry the same epoch. Tokens of
// different scopes are ordered by scope first, so Compare is a total order
// usable with slices.SortFunc.
func (t Token) Compare(u Token) int {
	if c := strings.Compare(t.Scope, u.Scope); c != 0 {
		return c
	}
	switch {
	case t.Epoch < u.Epoch:
		return -1
	case t.Epoch > u.Epoch:
		return 1
	}
	return 0
}

// PartitionScope returns the scope of partition p, "p/<p>".
func PartitionScope(p int) string { return "p/" + strconv.Itoa(p) }

// LeaderScope returns the scope of the election named name, "leader/<name>".
func LeaderScope(name string) string { return "leader/" + name }

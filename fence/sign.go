package fence

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync/atomic"
)

// signatureDomain separates the signatures of tokens from anything else a
// key might sign: every signed message starts with it, then the key ID and
// the token's text form, each followed by a NUL byte (which neither a key
// ID nor a token's text can contain). A signature therefore stands for one
// token under one key ID, and for nothing else.
const signatureDomain = "tenure-fence-token-v1"

// maxKeyIDLen is the longest key ID, in bytes.
const maxKeyIDLen = 64

// Signature is the fleet's Ed25519 signature of one token, with the ID of
// the key that made it. The zero Signature is no signature. Signature is a
// small comparable value, safe to copy and to share between goroutines.
type Signature struct {
	// KeyID names the signing key, so that verifiers can hold several
	// public keys while keys rotate.
	KeyID string
	// Sig is the Ed25519 signature of the signed message: the domain
	// "tenure-fence-token-v1", the key ID and the token's text form, each
	// followed by a NUL byte, so that it stands for one token under one key
	// ID and for nothing else.
	Sig [ed25519.SignatureSize]byte
}

// IsZero reports whether s is the zero Signature: no signature.
func (s Signature) IsZero() bool { return s == Signature{} }

// String returns the signature's text form, "<key ID>:<signature in
// unpadded base64url>", which ParseSignature reads back.
func (s Signature) String() string {
	return s.KeyID + ":" + base64.RawURLEncoding.EncodeToString(s.Sig[:])
}

// ParseSignature reads the text form written by Signature.String. Malformed
// input yields an error wrapping ErrBadSignature (and so ErrUnverified).
func ParseSignature(text string) (Signature, error) {
	kid, enc, ok := strings.Cut(text, ":")
	if !ok {
		return Signature{}, fmt.Errorf("%w: no ':' after the key ID", ErrBadSignature)
	}
	if p := keyIDProblem(kid); p != "" {
		return Signature{}, fmt.Errorf("%w: %s", ErrBadSignature, p)
	}
	var s Signature
	if base64.RawURLEncoding.EncodedLen(len(s.Sig)) != len(enc) {
		return Signature{}, fmt.Errorf("%w: signature of %d characters, want %d", ErrBadSignature, len(enc), base64.RawURLEncoding.EncodedLen(len(s.Sig)))
	}
	if _, err := base64.RawURLEncoding.Strict().Decode(s.Sig[:], []byte(enc)); err != nil {
		return Signature{}, fmt.Errorf("%w: signature is not base64url: %w", ErrBadSignature, err)
	}
	s.KeyID = kid
	return s, nil
}

// validateKeyID reports whether id can name a key (see NewSigner). The
// error wraps ErrInvalidKey.
func validateKeyID(id string) error {
	if p := keyIDProblem(id); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidKey, p)
	}
	return nil
}

// keyIDProblem says what makes id an invalid key ID, "" if nothing does.
func keyIDProblem(id string) string {
	if id == "" || len(id) > maxKeyIDLen {
		return fmt.Sprintf("key ID of %d bytes (1 to %d)", len(id), maxKeyIDLen)
	}
	for _, c := range []byte(id) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return fmt.Sprintf("key ID %q has a character other than letters, digits, '.', '_' and '-'", id)
		}
	}
	return ""
}

// signedMessage is what a signature of t under key ID kid signs.
func signedMessage(kid string, t Token) []byte {
	b := make([]byte, 0, len(signatureDomain)+len(kid)+len(t.Scope)+24)
	b = append(b, signatureDomain...)
	b = append(b, 0)
	b = append(b, kid...)
	b = append(b, 0)
	b = append(b, t.Scope...)
	b = append(b, '@')
	b = strconv.AppendInt(b, t.Epoch, 10)
	return append(b, 0)
}

// Signer signs the tokens a fleet issues with an Ed25519 private key. Only
// the fleet's nodes hold it; downstream services hold the public key in a
// SignatureVerifier. A Signer is immutable and safe for concurrent use.
type Signer struct {
	kid string
	key ed25519.PrivateKey
}

// NewSigner returns a Signer that signs with key under key ID keyID, 1 to
// 64 bytes of ASCII letters, digits, '.', '_' and '-'. It returns an error
// wrapping ErrInvalidKey for an invalid key ID or a key that is not
// ed25519.PrivateKeySize bytes. The
// key is copied.
func NewSigner(keyID string, key ed25519.PrivateKey) (*Signer, error) {
	if err := validateKeyID(keyID); err != nil {
		return nil, err
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: private key of %d bytes, want %d", ErrInvalidKey, len(key), ed25519.PrivateKeySize)
	}
	return &Signer{kid: keyID, key: append(ed25519.PrivateKey(nil), key...)}, nil
}

// KeyID returns the ID of the Signer's key.
func (s *Signer) KeyID() string { return s.kid }

// Public returns the public key that verifies the Signer's signatures.
func (s *Signer) Public() ed25519.PublicKey {
	return append(ed25519.PublicKey(nil), s.key.Public().(ed25519.PublicKey)...)
}

// Sign returns the signature of t. It returns an error wrapping
// ErrInvalidToken for an invalid t, and ErrNilArgument on a nil *Signer.
func (s *Signer) Sign(t Token) (Signature, error) {
	if s == nil {
		return Signature{}, fmt.Errorf("%w: nil *Signer", ErrNilArgument)
	}
	if err := t.Validate(); err != nil {
		return Signature{}, err
	}
	sig := Signature{KeyID: s.kid}
	copy(sig.Sig[:], ed25519.Sign(s.key, signedMessage(s.kid, t)))
	return sig, nil
}

// SignatureVerifier checks the fleet's signatures of tokens with the public
// keys it holds, by key ID: during a rotation it holds the old key and the
// new one, and the old one is dropped (by building a new verifier) once no
// node signs with it. It needs no etcd.
//
// An Ed25519 verification costs tens of microseconds, and a holder
// presents one token with one signature for its whole tenure, so the
// verifier remembers, per scope, the last token and signature it found
// valid, and admits exactly that pair again without the arithmetic. Only
// verified pairs are remembered, at most one per scope, so the memory is
// bounded by the scopes the fleet signs. A SignatureVerifier's keys never
// change; it is safe for concurrent use.
type SignatureVerifier struct {
	keys map[string]ed25519.PublicKey
	last atomic.Pointer[map[string]verified] // by scope; replaced, never changed
}

// verified is a token's epoch and signature that a SignatureVerifier
// found valid.
type verified struct {
	epoch int64
	sig   Signature
}

// NewSignatureVerifier returns a verifier of the signatures made by the
// keys in keys, by key ID. It returns an error wrapping ErrInvalidKey for
// an empty map, an invalid key ID or a key that is not
// ed25519.PublicKeySize bytes. The map and keys are copied.
func NewSignatureVerifier(keys map[string]ed25519.PublicKey) (*SignatureVerifier, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no public keys", ErrInvalidKey)
	}
	v := &SignatureVerifier{keys: maps.Clone(keys)}
	for kid, k := range v.keys {
		if err := validateKeyID(kid); err != nil {
			return nil, err
		}
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: public key %q of %d bytes, want %d", ErrInvalidKey, kid, len(k), ed25519.PublicKeySize)
		}
		v.keys[kid] = append(ed25519.PublicKey(nil), k...)
	}
	return v, nil
}

// Verify reports whether sig is the fleet's signature of t: nil if it is;
// otherwise an error wrapping ErrUnsigned (the zero sig), ErrUnknownKey
// (a key ID the verifier holds no key for) or ErrBadSignature (any other
// mismatch), each of which wraps ErrUnverified; ErrNilArgument on a nil
// *SignatureVerifier. It does not check t against any floor: an admitted
// signature says the fleet issued t, not that t's tenure still lasts. ctx
// is not used: verifying never blocks.
func (v *SignatureVerifier) Verify(_ context.Context, t Token, sig Signature) error {
	if v == nil {
		return fmt.Errorf("%w: nil *SignatureVerifier", ErrNilArgument)
	}
	if sig.IsZero() {
		return fmt.Errorf("%w: token %s", ErrUnsigned, t)
	}
	if last := v.last.Load(); last != nil {
		if seen, ok := (*last)[t.Scope]; ok && seen.epoch == t.Epoch && seen.sig == sig {
			return nil
		}
	}
	k, ok := v.keys[sig.KeyID]
	if !ok {
		return fmt.Errorf("%w: key ID %q for token %s", ErrUnknownKey, sig.KeyID, t)
	}
	if !ed25519.Verify(k, signedMessage(sig.KeyID, t), sig.Sig[:]) {
		return fmt.Errorf("%w: key ID %q for token %s", ErrBadSignature, sig.KeyID, t)
	}
	v.remember(t, sig)
	return nil
}

// remember records that sig is valid for t, replacing what was recorded
// for t's scope.
func (v *SignatureVerifier) remember(t Token, sig Signature) {
	for {
		old := v.last.Load()
		next := make(map[string]verified, 1)
		if old != nil {
			next = maps.Clone(*old)
		}
		next[t.Scope] = verified{epoch: t.Epoch, sig: sig}
		if v.last.CompareAndSwap(old, &next) {
			return
		}
	}
}

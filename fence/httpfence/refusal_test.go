package httpfence_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
)

// roundTrip writes r with WriteRefusal and returns the recorded response.
func roundTrip(t testing.TB, r *httpfence.Refusal) *http.Response {
	t.Helper()
	w := httptest.NewRecorder()
	require.NoError(t, httpfence.WriteRefusal(w, r))
	return w.Result()
}

func TestRefusalRoundTrip(t *testing.T) {
	tests := []struct {
		r         httpfence.Refusal
		status    int
		retry     bool   // Retryable
		after     bool   // Retry-After set
		is        error  // a fencing error it matches, if any
		errString string // Error(), if asserted
	}{
		{r: httpfence.Refusal{Kind: httpfence.RefusalStale, Message: "stale!", Scope: "p/3", Presented: 7, Current: 9},
			status: 409, retry: true, is: fence.ErrStale, errString: "stale!"},
		{r: httpfence.Refusal{Kind: httpfence.RefusalStale, Scope: "p/3", Presented: 7, Current: 9},
			status: 409, retry: true, is: fence.ErrStale, errString: `fence: stale token for scope "p/3": epoch 7 < current epoch 9`},
		{r: httpfence.Refusal{Kind: httpfence.RefusalStale, Message: "undescribed"},
			status: 409, retry: true, is: fence.ErrStale},
		{r: httpfence.Refusal{Kind: httpfence.RefusalNotOwner, Message: "router: not the owner", Hint: json.RawMessage(`{"partition":0,"owner":"n2","addr":"10.0.0.2:80","epoch":41,"ring_version":18446744073709551615}`)},
			status: 421, retry: true},
		{r: httpfence.Refusal{Kind: httpfence.RefusalNotOwner, Hint: json.RawMessage(`{"partition":17,"owner":"n2","addr":"h:1","epoch":3}`)},
			status: 421, retry: true, errString: `httpfence: refused: not-owner`},
		{r: httpfence.Refusal{Kind: httpfence.RefusalHandoff, Hint: json.RawMessage(`{"partition":5,"owner":"n3","addr":"h:3","ring_version":12,"acquiring":true}`)},
			status: 503, retry: true, after: true},
		{r: httpfence.Refusal{Kind: httpfence.RefusalHandoff, Hint: json.RawMessage(`{"partition":5}`)},
			status: 503, retry: true, after: true, errString: "httpfence: refused: handoff"},
		{r: httpfence.Refusal{Kind: httpfence.RefusalSessionLost, Message: "session lost", Hint: json.RawMessage(`{"partition":9}`)},
			status: 503, retry: true, after: true},
		{r: httpfence.Refusal{Kind: httpfence.RefusalUnavailable, Message: "store down"},
			status: 503, retry: true, after: true},
		{r: httpfence.Refusal{Kind: httpfence.RefusalInvalidToken, Message: "bad token"},
			status: 400, is: fence.ErrInvalidToken},
		{r: httpfence.Refusal{Kind: httpfence.RefusalNoToken, Message: "no token"},
			status: 428, is: fence.ErrNoToken},
		{r: httpfence.Refusal{Kind: httpfence.RefusalUnverified, Message: "made up"},
			status: 403, is: fence.ErrUnverified},
		{r: httpfence.Refusal{Kind: "from-the-future", Message: "新しい", Hint: json.RawMessage(`{"owner":"ключ"}`)},
			status: 500},
	}
	for _, tt := range tests {
		t.Run(string(tt.r.Kind), func(t *testing.T) {
			resp := roundTrip(t, &tt.r)
			require.Equal(t, tt.status, resp.StatusCode)
			require.Equal(t, tt.status, httpfence.Status(&tt.r))
			require.Equal(t, string(tt.r.Kind), resp.Header.Get(httpfence.RefusalHeader))
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Equal(t, tt.after, resp.Header.Get("Retry-After") != "", "Retry-After")

			got, err := httpfence.ReadRefusal(resp)
			require.NoError(t, err)
			require.Equal(t, tt.r, *got)
			require.Equal(t, tt.retry, got.Retryable())
			var ref *httpfence.Refusal
			require.ErrorAs(t, error(got), &ref)
			if tt.is != nil {
				require.ErrorIs(t, got, tt.is)
			}
			for _, e := range []error{fence.ErrStale, fence.ErrInvalidToken, fence.ErrNoToken} {
				if e != tt.is {
					require.NotErrorIs(t, got, e)
				}
			}
			if tt.errString != "" {
				require.Equal(t, tt.errString, got.Error())
			}
			if tt.r.Kind == httpfence.RefusalStale && tt.r.Scope != "" {
				var se *fence.StaleError
				require.ErrorAs(t, got, &se)
				require.Equal(t, fence.StaleError{Scope: tt.r.Scope, Presented: tt.r.Presented, Current: tt.r.Current}, *se)
			}

			// ResponseError and RefusalOf sit on the same format.
			require.Equal(t, &tt.r, httpfence.ResponseError(roundTrip(t, &tt.r)))
			w := httptest.NewRecorder()
			require.NoError(t, httpfence.WriteRefusal(w, httpfence.RefusalOf(got)))
			again, err := httpfence.ReadRefusal(w.Result())
			require.NoError(t, err)
			require.Equal(t, tt.r, *again)
		})
	}
}

// RefusalOf turns fencing errors into refusals and leaves others alone.
func TestRefusalOf(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want *httpfence.Refusal
	}{
		{&fence.StaleError{Scope: "p/1", Presented: 2, Current: 3}, &httpfence.Refusal{Kind: httpfence.RefusalStale,
			Message: `fence: stale token for scope "p/1": epoch 2 < current epoch 3`, Scope: "p/1", Presented: 2, Current: 3}},
		{fence.ErrStale, &httpfence.Refusal{Kind: httpfence.RefusalStale, Message: fence.ErrStale.Error()}},
		{fence.ErrInvalidToken, &httpfence.Refusal{Kind: httpfence.RefusalInvalidToken, Message: fence.ErrInvalidToken.Error()}},
		{fence.ErrNoToken, &httpfence.Refusal{Kind: httpfence.RefusalNoToken, Message: fence.ErrNoToken.Error()}},
		{fence.ErrBadSignature, &httpfence.Refusal{Kind: httpfence.RefusalUnverified, Message: fence.ErrBadSignature.Error()}},
		{fence.ErrUnknownEpoch, &httpfence.Refusal{Kind: httpfence.RefusalUnverified, Message: fence.ErrUnknownEpoch.Error()}},
		{errors.New("disk full"), nil},
		{nil, nil},
	} {
		ref := httpfence.RefusalOf(tt.err)
		require.Equal(t, tt.want, ref, "%v", tt.err)
		if ref == nil {
			continue
		}
		w := httptest.NewRecorder()
		require.NoError(t, httpfence.WriteRefusal(w, ref))
		got, err := httpfence.ReadRefusal(w.Result())
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "%v", tt.err)
	}
}

// response builds a response that names kind (if not empty) in its
// RefusalHeader and carries body.
func response(kinds []string, body string) *http.Response {
	h := http.Header{}
	for _, k := range kinds {
		h.Add(httpfence.RefusalHeader, k)
	}
	return &http.Response{StatusCode: http.StatusConflict, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

// An absent refusal is nil without error; a malformed one is an error that
// is never a *Refusal.
func TestReadRefusalMalformed(t *testing.T) {
	r, err := httpfence.ReadRefusal(response(nil, `{"kind":"stale"}`))
	require.NoError(t, err)
	require.Nil(t, r, "no header: the application's own answer")
	require.NoError(t, httpfence.ResponseError(response(nil, "")))

	for name, resp := range map[string]*http.Response{
		"empty body":       response([]string{"stale"}, ""),
		"not json":         response([]string{"stale"}, "stale token"),
		"trailing garbage": response([]string{"stale"}, `{"kind":"stale"} x`),
		"kind mismatch":    response([]string{"stale"}, `{"kind":"not-owner"}`),
		"kind missing":     response([]string{"stale"}, `{"scope":"p/1"}`),
		"two headers":      response([]string{"stale", "stale"}, `{"kind":"stale"}`),
		"bad kind":         response([]string{"Stale Token"}, `{"kind":"Stale Token"}`),
		"negative epoch":   response([]string{"stale"}, `{"kind":"stale","scope":"p/1","presented":-1}`),
		"hint no object":   response([]string{"not-owner"}, `{"kind":"not-owner","hint":-3}`),
		"bad scope":        response([]string{"stale"}, `{"kind":"stale","scope":"p 1","presented":1}`),
		"wrong types":      response([]string{"stale"}, `{"kind":"stale","presented":"7"}`),
		"huge":             response([]string{"stale"}, `{"kind":"stale","message":"`+strings.Repeat("x", 70<<10)+`"}`),
		"nil body":         {StatusCode: 409, Header: http.Header{httpfence.RefusalHeader: {"stale"}}},
	} {
		r, err := httpfence.ReadRefusal(resp)
		require.ErrorIs(t, err, httpfence.ErrInvalidRefusal, name)
		require.Nil(t, r, name)
	}

	err = httpfence.ResponseError(response([]string{"stale"}, "garbage"))
	require.ErrorIs(t, err, httpfence.ErrInvalidRefusal)
	require.ErrorIs(t, err, fence.ErrStale, "the header alone says stale")
	var ref *httpfence.Refusal
	require.False(t, errors.As(err, &ref), "a malformed refusal is not a *Refusal")
	require.Equal(t, 1, strings.Count(err.Error(), "httpfence:"), "one prefix: %v", err)

	_, err = httpfence.ReadRefusal(nil)
	require.ErrorIs(t, err, httpfence.ErrNilArgument)
}

// WriteRefusal never answers a bad refusal as success.
func TestWriteRefusalInvalid(t *testing.T) {
	for name, r := range map[string]*httpfence.Refusal{
		"nil":            nil,
		"empty kind":     {},
		"header break":   {Kind: "stale\r\nX-Evil: 1"},
		"negative epoch": {Kind: httpfence.RefusalStale, Presented: -1},
		"hint no object": {Kind: httpfence.RefusalNotOwner, Hint: json.RawMessage(`[1]`)},
		"hint no json":   {Kind: httpfence.RefusalNotOwner, Hint: json.RawMessage(`{"owner":`)},
	} {
		w := httptest.NewRecorder()
		err := httpfence.WriteRefusal(w, r)
		require.ErrorIs(t, err, httpfence.ErrInvalidRefusal, name)
		require.Equal(t, http.StatusServiceUnavailable, w.Code, name)
		got, rerr := httpfence.ReadRefusal(w.Result())
		require.NoError(t, rerr, name)
		require.Equal(t, httpfence.RefusalUnavailable, got.Kind, name)
	}
}

// FuzzReadRefusal: reading any response never panics; what it reads is a
// refusal that writes back to itself; what it refuses is never a *Refusal.
func FuzzReadRefusal(f *testing.F) {
	for _, r := range []httpfence.Refusal{
		{Kind: httpfence.RefusalStale, Message: "m", Scope: "p/1", Presented: 3, Current: 4},
		{Kind: httpfence.RefusalNotOwner, Hint: json.RawMessage(`{"partition":2,"owner":"n1","addr":"h:1","epoch":9,"ring_version":3}`)},
		{Kind: httpfence.RefusalHandoff, Hint: json.RawMessage(`{"acquiring":true}`)},
	} {
		w := httptest.NewRecorder()
		_ = httpfence.WriteRefusal(w, &r)
		f.Add(string(r.Kind), w.Body.String())
	}
	f.Add("stale", `{"kind":"stale","presented":-1}`)
	f.Add("", `{}`)
	f.Add("x", `{"kind":"x","hint":{"ring_version":18446744073709551615}}`)
	f.Add("x", `{"kind":"x","hint": { "a" : [1, 2] } }`)
	f.Add("stale", `{"kind":"stale","kind":"stale","KIND":"stale"}`)
	f.Fuzz(func(t *testing.T, kind, body string) {
		resp := response([]string{kind}, body)
		r, err := httpfence.ReadRefusal(resp)
		if err != nil {
			if !errors.Is(err, httpfence.ErrInvalidRefusal) || r != nil {
				t.Fatalf("ReadRefusal(%q, %q) = %v, %v", kind, body, r, err)
			}
			return
		}
		if r == nil || string(r.Kind) != kind {
			t.Fatalf("ReadRefusal(%q, %q) = %+v without error", kind, body, r)
		}
		_ = r.Error()
		_ = r.Retryable()
		back, err := httpfence.ReadRefusal(roundTrip(t, r))
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip of %+v: %+v, %v", r, back, err)
		}
	})
}

package childproc

import (
	"bytes"
	"io"
	"sync"
)

// MaxLine bounds a line given to LineWriter.Line: a longer one is passed
// on in pieces.
const MaxLine = 64 << 10

// LineWriter calls Line for every complete line written to it, without its
// newline. It is for a child's output, which exec writes from one
// goroutine; it is not safe for concurrent writers.
type LineWriter struct {
	Line func([]byte)
	buf  []byte
}

func (w *LineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.Line(w.buf[:i])
		w.buf = w.buf[:copy(w.buf, w.buf[i+1:])]
	}
	if len(w.buf) > MaxLine {
		w.Line(w.buf)
		w.buf = w.buf[:0]
	}
	return len(b), nil
}

// Tail keeps the last Size bytes written to it, for the error message of a
// child that died, and passes everything on to W (nil: nowhere). It is safe
// for concurrent use.
type Tail struct {
	W    io.Writer
	Size int

	mu   sync.Mutex
	last []byte
}

func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	t.last = append(t.last, b...)
	if over := len(t.last) - t.Size; over > 0 {
		t.last = t.last[:copy(t.last, t.last[over:])]
	}
	t.mu.Unlock()
	if t.W != nil {
		return t.W.Write(b)
	}
	return len(b), nil
}

// String returns what Tail kept, without surrounding space.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.last))
}

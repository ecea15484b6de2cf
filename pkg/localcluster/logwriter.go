package localcluster

import (
	"bytes"
	"io"
	"sync"
)

// prefixWriter tags each line with the process name, because the three
// processes share one Options.Log and their lines would otherwise be
// impossible to tell apart. The mutex is shared by all prefixWriters on the
// same Log so that lines from different processes do not interleave.
type prefixWriter struct {
	mu     *sync.Mutex
	out    io.Writer
	prefix []byte
	buf    []byte // a partial line waiting for its newline
}

func newPrefixWriter(mu *sync.Mutex, out io.Writer, name string) *prefixWriter {
	return &prefixWriter{mu: mu, out: out, prefix: []byte(name + " | ")}
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := append(append([]byte{}, w.prefix...), w.buf[:i+1]...)
		w.buf = w.buf[i+1:]
		if _, err := w.out.Write(line); err != nil {
			// A failing Log must not stop the process: the log file
			// still has everything.
			return len(p), nil
		}
	}
}

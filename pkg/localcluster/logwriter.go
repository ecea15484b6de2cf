/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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

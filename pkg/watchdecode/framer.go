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

package watchdecode

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// framer splits a JSON stream into its top-level values by following
// strings and nesting, where client-go's JSON framer parses each value to
// find its end. Writing is client-go's.
type framer struct {
	runtime.Framer
}

func (framer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r, buf: make([]byte, 0, 64<<10)}
}

// frameReader returns one JSON value per Read, as client-go's framers do: a
// value longer than the caller's buffer comes in parts, each but the last
// with io.ErrShortBuffer.
type frameReader struct {
	r io.ReadCloser
	// buf[start:] holds bytes read from r and not yet framed.
	buf   []byte
	start int
	// rest is the part of the current value not yet returned.
	rest []byte
}

func (f *frameReader) Read(p []byte) (int, error) {
	if len(f.rest) == 0 {
		frame, err := f.next()
		if err != nil {
			return 0, err
		}
		f.rest = frame
	}
	n := copy(p, f.rest)
	if f.rest = f.rest[n:]; len(f.rest) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *frameReader) Close() error { return f.r.Close() }

// next returns the next value, which stays valid until the following call.
func (f *frameReader) next() ([]byte, error) {
	var s frameScan
	i := f.start
	for {
		for ; i < len(f.buf); i++ {
			done, err := s.step(f.buf[i])
			if err != nil {
				return nil, err
			}
			if done {
				frame := f.buf[f.start+s.leading : i+1]
				f.start = i + 1
				return frame, nil
			}
		}
		if err := f.fill(); err != nil {
			if err == io.EOF && s.depth == 0 {
				// Only whitespace since the last value: the stream ended
				// cleanly.
				f.start = len(f.buf)
				return nil, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		i = f.start + s.scanned
	}
}

// fill moves the unframed bytes to the front of buf and reads more after
// them, growing buf when it is full.
func (f *frameReader) fill() error {
	n := copy(f.buf[:cap(f.buf)], f.buf[f.start:])
	f.buf, f.start = f.buf[:n], 0
	if n == cap(f.buf) {
		f.buf = append(f.buf, make([]byte, n)...)[:n]
	}
	m, err := f.r.Read(f.buf[n:cap(f.buf)])
	f.buf = f.buf[:n+m]
	if m > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// frameScan follows one value byte by byte.
type frameScan struct {
	// scanned counts the value's bytes seen so far (leading whitespace
	// included), so that a scan survives fill moving the buffer.
	scanned int
	// leading counts the whitespace before the value.
	leading           int
	depth             int
	inString, escaped bool
}

// step takes the next byte and reports whether it ends the value. A value
// must be an object or an array, as every watch event is.
func (s *frameScan) step(c byte) (done bool, err error) {
	s.scanned++
	switch {
	case s.inString:
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
	case s.depth == 0:
		switch {
		case isSpace(c):
			s.leading++
		case c == '{' || c == '[':
			s.depth++
		default:
			return false, fmt.Errorf("watch stream: %q where a JSON object should begin", c)
		}
	case c == '"':
		s.inString = true
	case c == '{' || c == '[':
		s.depth++
	case c == '}' || c == ']':
		s.depth--
		return s.depth == 0, nil
	}
	return false, nil
}

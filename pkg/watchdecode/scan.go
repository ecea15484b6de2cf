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

// scanEvent reads a watch event's envelope, {"type": "ADDED", "object":
// {...}}, without parsing the object: it returns the type and the object's
// bytes (nil for null). ok is false for anything it does not recognize,
// such as an escaped key, a key other than those two, or a missing type.
// client-go's decoder then parses the envelope, and says what is wrong with
// it if anything is. The object's bytes are only delimited here; decoding
// the object checks them.
func scanEvent(b []byte) (typ string, object []byte, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return "", nil, false
	}
	haveType := false
	for i = skipSpace(b, i+1); ; i = skipSpace(b, i+1) {
		key, value, next, ok := member(b, i)
		if !ok {
			return "", nil, false
		}
		switch key {
		case "type":
			if typ, _, ok = plainString(value, 0); !ok {
				return "", nil, false
			}
			haveType = true
		case "object":
			object = value
		default:
			return "", nil, false
		}
		if i = skipSpace(b, next); i >= len(b) || (b[i] != ',' && b[i] != '}') {
			return "", nil, false
		}
		if b[i] == '}' {
			break
		}
	}
	if !haveType || skipSpace(b, i+1) != len(b) {
		return "", nil, false
	}
	if string(object) == "null" {
		object = nil
	}
	return typ, object, true
}

// member reads the object member "key": value at b[i]: the key (a plain
// string), the value's bytes, and the index after them.
func member(b []byte, i int) (key string, value []byte, next int, ok bool) {
	key, i, ok = plainString(b, i)
	if !ok {
		return "", nil, 0, false
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return "", nil, 0, false
	}
	i = skipSpace(b, i+1)
	end, ok := skipValue(b, i)
	if !ok {
		return "", nil, 0, false
	}
	return key, b[i:end], end, true
}

// plainString reads the JSON string at b[i] if it is printable ASCII with
// no escapes, which every key and event type of the API server's is: the
// string, and the index after its closing quote.
func plainString(b []byte, i int) (s string, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", 0, false
		}
	}
	return "", 0, false
}

// skipValue returns the index after the JSON value at b[i]. It follows
// strings and nesting, and checks that brackets match, but not what is
// between them: the decoder of the value does.
func skipValue(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipNested(b, i)
	}
	// A number, true, false or null: up to the next delimiter.
	j := i
	for j < len(b) && !isDelimiter(b[j]) {
		j++
	}
	return j, j > i
}

// skipString returns the index after the string whose opening quote is at
// b[i].
func skipString(b []byte, i int) (end int, ok bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipNested returns the index after the object or array that opens at
// b[i], whose brackets must match.
func skipNested(b []byte, i int) (end int, ok bool) {
	var stack [64]byte
	open := stack[:0]
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			if j, ok = skipString(b, j); !ok {
				return 0, false
			}
			j--
		case '{', '[':
			open = append(open, c)
		case '}', ']':
			if len(open) == 0 || open[len(open)-1] != c-2 { // '{'+2 == '}', '['+2 == ']'
				return 0, false
			}
			if open = open[:len(open)-1]; len(open) == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}

func isDelimiter(c byte) bool {
	return c == ',' || c == '}' || c == ']' || isSpace(c)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

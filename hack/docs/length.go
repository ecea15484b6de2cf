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

package docs

import (
	"fmt"
	"strings"
)

// MaxLines caps the pages meant to be read through: the README is the front
// door and the benchmark page a reference, and both grew into lab notebooks
// before they had a cap. Dated runs belong in the bench's reports, one per run.
var MaxLines = map[string]int{
	"README.md":         150,
	"docs/benchmark.md": 250,
}

// CheckLength: no capped page is longer than its cap.
func CheckLength(_ *Repo, d *Docs) []Finding {
	var out []Finding
	for _, p := range sortedKeys(MaxLines) {
		doc := d.byPath(p)
		if doc == nil {
			continue
		}
		n := 0
		for i, l := range doc.lines {
			if i == len(doc.lines)-1 && l == "" {
				break // the newline that ends the last line
			}
			// A line that is only an HTML comment (the fork command's
			// markers) is not shown: it is not read either.
			if t := strings.TrimSpace(l); strings.HasPrefix(t, "<!--") && strings.HasSuffix(t, "-->") {
				continue
			}
			n++
		}
		if n > MaxLines[p] {
			last := len(doc.lines)
			if last > 0 && doc.lines[last-1] == "" {
				last--
			}
			out = append(out, Finding{Pos: at(p, last), Msg: fmt.Sprintf(
				"%s has %d lines shown, over its cap of %d: move detail to the page that owns it and link there", p, n, MaxLines[p])})
		}
	}
	return out
}

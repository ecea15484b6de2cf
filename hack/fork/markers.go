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

package main

import (
	"fmt"
	"regexp"
	"strings"
)

// A marker line opens or closes a block of lines that belong to an
// optional part: `// fork:begin shards` ... `// fork:end shards` in Go,
// `# fork:...` in the Makefile, shell and YAML, `<!-- fork:... -->` in
// Markdown. A fork deletes every marker line, and the blocks of the parts
// it leaves out. Blocks may nest. One line of a part, where a block's
// marker lines would break what they sit in (a row of a Markdown table),
// ends in `<!-- fork:line <part> -->` (or `// fork:line`, `# fork:line`):
// the fork drops the line with its part, else only the marker. A part
// written !ui marks what stands in for the part when it is left out: the
// fork keeps it only then, and this project shows both.
var (
	markerRE     = regexp.MustCompile(`^\s*(?://|#|<!--)\s*fork:(\S+)\s+(\S+)\s*(?:-->)?\s*$`)
	lineMarkerRE = regexp.MustCompile(`\s*(?://|#|<!--)\s*fork:line\s+(\S+)\s*(?:-->)?\s*$`)
)

// marker reports whether line is a marker line, and its verb and part.
func marker(line string) (verb, part string, ok bool) {
	m := markerRE.FindStringSubmatch(line)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// cutMarkers returns text without its marker lines and without the blocks
// of the parts drop says to leave out. A marker that is unbalanced, has an
// unknown verb or names an unknown part is an error naming its line.
func cutMarkers(text string, drop func(part string) bool) (string, error) {
	lines := strings.SplitAfter(text, "\n")
	var out strings.Builder
	type open struct {
		part string
		line int
	}
	var stack []open
	dropping := 0 // how many open blocks are left out
	for i, line := range lines {
		verb, part, ok := marker(strings.TrimRight(line, "\n"))
		if !ok {
			if m := lineMarkerRE.FindStringSubmatchIndex(strings.TrimRight(line, "\n")); m != nil {
				part, not := strings.CutPrefix(line[m[2]:m[3]], "!")
				if _, known := parts[part]; !known {
					return "", fmt.Errorf("line %d: fork:line names unknown part %q (known: %s)", i+1, part, partNames())
				}
				if drop(part) != not {
					continue
				}
				line = line[:m[0]] + line[len(strings.TrimRight(line, "\n")):]
			}
			if dropping == 0 {
				out.WriteString(line)
			}
			continue
		}
		name, not := strings.CutPrefix(part, "!")
		if _, known := parts[name]; !known {
			return "", fmt.Errorf("line %d: fork:%s names unknown part %q (known: %s)", i+1, verb, name, partNames())
		}
		switch verb {
		case "begin":
			stack = append(stack, open{part, i + 1})
			if dropping > 0 || drop(name) != not {
				dropping++
			}
		case "end":
			if len(stack) == 0 || stack[len(stack)-1].part != part {
				return "", fmt.Errorf("line %d: fork:end %s closes no fork:begin %s", i+1, part, part)
			}
			stack = stack[:len(stack)-1]
			if dropping > 0 {
				dropping--
			}
		default:
			return "", fmt.Errorf("line %d: fork:%s: want fork:begin or fork:end", i+1, verb)
		}
	}
	if len(stack) > 0 {
		o := stack[len(stack)-1]
		return "", fmt.Errorf("line %d: fork:begin %s is never closed", o.line, o.part)
	}
	return out.String(), nil
}

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
	"os"
	"strconv"
	"strings"
	"time"
)

// FlagsDoc is the page whose generated tables list the controller's flags.
const FlagsDoc = "docs/flags.md"

// The markers around the generated part of docs/flags.md. cmd/controller's
// TestFlagsDocIsFresh writes what is between them from the flag set
// (hack/update-docs.sh) and fails when it differs.
const (
	GeneratedBegin = "<!-- BEGIN GENERATED: hack/update-docs.sh renders this from cmd/controller's flag set; do not edit -->"
	GeneratedEnd   = "<!-- END GENERATED -->"
)

// Flag is one row of the generated flag tables.
type Flag struct {
	Name, Type, Default string
	// Line is the row's line in docs/flags.md.
	Line int
}

// FlagSet is the controller's flags as docs/flags.md lists them.
type FlagSet struct {
	ByName map[string]*Flag
	// Refused are hidden flags kept only to refuse them with the reason.
	Refused map[string]bool
}

// has tells whether name is a flag of the controller, refused ones
// included, or pflag's own --help.
func (f *FlagSet) has(name string) bool {
	return f.ByName[name] != nil || f.Refused[name] || name == "help" || name == "h"
}

// readFlagsDoc parses the generated part of docs/flags.md.
func readFlagsDoc(root string) (*FlagSet, error) {
	b, err := os.ReadFile(joinRoot(root, FlagsDoc))
	if err != nil {
		return nil, err
	}
	fs := &FlagSet{ByName: map[string]*Flag{}, Refused: map[string]bool{}}
	in, seen := false, false
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.TrimSpace(line) == GeneratedBegin:
			in, seen = true, true
		case strings.TrimSpace(line) == GeneratedEnd:
			in = false
		case !in:
		case strings.HasPrefix(line, "| `-"):
			cells := splitRow(line)
			if len(cells) < 3 {
				return nil, fmt.Errorf("%s:%d: a flag row needs the cells Flag, Type and Default", FlagsDoc, i+1)
			}
			name := strings.TrimLeft(strings.Trim(cells[0], "`"), "-")
			fs.ByName[name] = &Flag{Name: name, Type: cells[1], Default: unquoteCell(cells[2]), Line: i + 1}
		case strings.HasPrefix(line, "Refused"):
			for _, f := range strings.Split(line, "`")[1:] {
				if strings.HasPrefix(f, "--") {
					fs.Refused[strings.TrimPrefix(f, "--")] = true
				}
			}
		}
	}
	if !seen || len(fs.ByName) == 0 {
		return nil, fmt.Errorf("%s: no generated flag table between %q and %q: run hack/update-docs.sh", FlagsDoc, GeneratedBegin, GeneratedEnd)
	}
	return fs, nil
}

// unquoteCell returns the text of a cell holding one code span.
func unquoteCell(c string) string {
	c = strings.TrimSpace(c)
	if len(c) >= 2 && c[0] == '`' && c[len(c)-1] == '`' {
		c = c[1 : len(c)-1]
	}
	if c == `""` {
		return ""
	}
	return c
}

// sameValue tells whether a value stated in a doc equals a flag's default,
// read by the flag's type: "15 s" is the duration 15s, "10/s" the number 10.
func sameValue(f *Flag, stated string) bool {
	stated = strings.TrimSpace(strings.Trim(stated, "`\""))
	switch f.Type {
	case "duration":
		want, err1 := time.ParseDuration(f.Default)
		got, err2 := time.ParseDuration(strings.ReplaceAll(stated, " ", ""))
		return err1 == nil && err2 == nil && want == got
	case "int", "float32", "float64", "int32", "int64", "uint":
		want, err1 := strconv.ParseFloat(f.Default, 64)
		got, err2 := strconv.ParseFloat(strings.TrimSuffix(strings.ReplaceAll(stated, ",", ""), "/s"), 64)
		return err1 == nil && err2 == nil && want == got
	}
	return stated == f.Default
}

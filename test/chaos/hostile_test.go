//go:build chaos && linux

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

package chaos_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestHostileBooks creates Books that the API server accepts but that push
// every limit: names of 253 characters (the most a name may have, and more
// than a label value may hold), titles of 256 multi-byte characters, control
// characters, NUL, bidi overrides, template and markup syntax, prices at both
// ends of the allowed range. Each must converge, its ConfigMap holding the
// title byte for byte and the price in decimal.
func TestHostileBooks(t *testing.T) {
	ns := env.Namespace(t)
	titles := []string{
		strings.Repeat("界", 256),
		strings.Repeat("😀", 256),
		strings.Repeat("x", 256),
		"NUL \x00 inside",
		"\x01\x02\x1b[31m ANSI red \x1b[0m\x7f",
		"tab\tnewline\ncarriage return\r",
		"\u202eright-to-left override\u202c and \u200bzero width",
		"\ufeffbyte order mark",
		"  leading and trailing spaces  ",
		`"quotes", \backslash\, 'apostrophes'`,
		"{{ .Values.x }} ${HOME} $(rm -rf /) `id`",
		"<script>alert(1)</script>&amp;",
		"combining e\u0301 and \u2028 line separator",
		"a",
	}
	prices := []int32{0, 1, math.MaxInt32, 1999, math.MaxInt32 - 1}
	names := []string{
		strings.Repeat("a", 253),
		strings.Repeat("b", 64),
		strings.Repeat("c", 63),
		"1.2.3",
		"a.b-c.d",
		strings.Repeat("d", 100) + "." + strings.Repeat("e", 100),
		"0",
	}
	want := map[string]spec{}
	for i, title := range titles {
		want[fmt.Sprintf("title-%02d", i)] = spec{title: title, price: prices[i%len(prices)]}
	}
	for i, name := range names {
		want[name] = spec{title: "long or odd name", price: prices[i%len(prices)]}
	}
	createSpecs(t, ns, want)
	env.StartController(t, framework.ControllerOptions{Namespace: ns})
	took := waitConverged(t, ns, expectation{want: want})
	figure(t, "%d Books with extreme titles, prices and names (up to 253 characters) converged in %v", len(want), took.Round(100*time.Millisecond))
}

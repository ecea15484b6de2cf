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

package v2

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The limits of a v2 Book's spec; the CRD schema's markers in types.go say
// the same, and manifests' tests hold ValidatePrice and ValidateAuthors to
// the schema's verdicts.
const (
	// MaxIntegerDigits is how many digits an amount may have before its point.
	MaxIntegerDigits = 15
	// MaxFractionDigits is the largest minor unit in ISO 4217 (CLF, UYW).
	MaxFractionDigits = 4
	// MaxAuthors is how many authors a Book may name.
	MaxAuthors = 16
	// MaxAuthorLength is the longest an author's name may be, in characters.
	MaxAuthorLength = 128
)

// ValidatePrice returns nil if the API server's v2 schema accepts p, and
// otherwise an error saying why not. It lets code that builds a v2 Book from
// something else (the v1 conversion's stash) refuse what the server would.
func ValidatePrice(p Price) error {
	minor, ok := MinorUnits(p.Currency)
	if !ok {
		return fmt.Errorf("currency %q is not an ISO 4217 code", p.Currency)
	}
	whole, fraction, hasPoint := strings.Cut(p.Amount, ".")
	switch {
	case !isDigits(whole) || (len(whole) > 1 && whole[0] == '0'):
		return fmt.Errorf("amount %q is not a decimal number without sign, exponent or leading zeros", p.Amount)
	case len(whole) > MaxIntegerDigits:
		return fmt.Errorf("amount %q has more than %d digits before the point", p.Amount, MaxIntegerDigits)
	case hasPoint && !isDigits(fraction):
		return fmt.Errorf("amount %q is not a decimal number without sign, exponent or leading zeros", p.Amount)
	case len(fraction) > minor:
		return fmt.Errorf("amount %q has %d decimal places; %s allows %d", p.Amount, len(fraction), p.Currency, minor)
	}
	return nil
}

// ValidateAuthors returns nil if the API server's v2 schema accepts authors
// as a Book's authors, and otherwise an error saying why not.
func ValidateAuthors(authors []string) error {
	if len(authors) > MaxAuthors {
		return fmt.Errorf("%d authors; at most %d", len(authors), MaxAuthors)
	}
	for i, a := range authors {
		if n := utf8.RuneCountInString(a); n < 1 || n > MaxAuthorLength {
			return fmt.Errorf("author %d has %d characters; want 1 to %d", i, n, MaxAuthorLength)
		}
		// CEL's trim(), which the schema's rule uses, is strings.TrimSpace.
		if strings.TrimSpace(a) == "" {
			return fmt.Errorf("author %d is only whitespace", i)
		}
	}
	return nil
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

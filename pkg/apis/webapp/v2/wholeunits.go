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
	"math"
	"strconv"
	"strings"
)

// WholePrice is the price of n whole units of no named currency: what a v1
// Book's spec.price says.
func WholePrice(n int32) Price {
	return Price{Amount: strconv.FormatInt(int64(n), 10), Currency: NoCurrency}
}

// WholeUnits is the price as a whole number, what a v1 Book's spec.price
// and the "price" key of a Book's ConfigMap say: the amount rounded half up
// (19.49 -> 19, 19.5 -> 20) and clamped to 0..2147483647, the largest
// int32. An amount that is not a decimal number gives 0, except one written
// as a plain int32 ("-5"), which gives that number, so that every v1 price,
// even one v1's schema refuses, comes back from v2 as it was.
func (p Price) WholeUnits() int32 {
	amount := p.Amount
	if n, err := strconv.ParseInt(amount, 10, 32); err == nil && strconv.FormatInt(n, 10) == amount {
		return int32(n)
	}
	whole, fraction, hasPoint := strings.Cut(amount, ".")
	if !digitsOnly(whole) || (hasPoint && !digitsOnly(fraction)) {
		return 0
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > len(strconv.Itoa(math.MaxInt32)) {
		return math.MaxInt32
	}
	n, _ := strconv.ParseInt("0"+whole, 10, 64) // at most 10 digits: fits
	if hasPoint && fraction[0] >= '5' {
		n++
	}
	return int32(min(n, math.MaxInt32))
}

// IsWholeUnits reports whether WholeUnits says the price exactly: no named
// currency (XXX) and an amount that is that whole number written plainly.
// Such a price is all a v1 Book can say.
func (p Price) IsWholeUnits() bool {
	return p.Currency == NoCurrency && p.Amount == strconv.FormatInt(int64(p.WholeUnits()), 10)
}

// digitsOnly reports whether s is one or more ASCII digits.
func digitsOnly(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

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

// Package fuzzer fills v1 and v2 Books with random specs that the API server
// accepts, for apimachinery's round-trip tests
// (k8s.io/apimachinery/pkg/api/apitesting/fuzzer and .../roundtrip): titles
// in any script, of 1 to 256 characters; v1 prices from 0 to the largest
// int32; v2 prices in every ISO 4217 currency with every number of decimal
// places the currency allows, up to 15 digits before the point; 0 to 16
// authors. Only tests import it.
package fuzzer

import (
	"math"
	"strconv"
	"strings"

	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	v1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	v2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// Funcs is apimachinery's fuzzer.FuzzerFuncs for the webapp.ydzs.io group;
// merge it after metafuzzer.Funcs (fuzzer.MergeFuzzerFuncs), which fills
// the object metadata.
//
// Half the v1 Books it makes are what the API server serves to a v1 client
// from a random v2 Book (v1.Book.ConvertFrom), stash annotation included;
// the other half are Books a v1 client writes, without one. No v2 Book
// carries the stash annotation, which the API server never stores.
func Funcs(_ runtimeserializer.CodecFactory) []any {
	codes := v2.CurrencyCodes()
	return []any{
		func(s *v1.BookSpec, c randfill.Continue) {
			s.Title = Title(c)
			s.Price = V1Price(c)
		},
		func(s *v2.BookSpec, c randfill.Continue) {
			s.Title = Title(c)
			s.Price = Price(c, codes)
			s.Authors = Authors(c)
		},
		func(b *v2.Book, c randfill.Continue) {
			c.FillNoCustom(b)
			if b.Annotations != nil {
				delete(b.Annotations, v1.StashAnnotation)
				if len(b.Annotations) == 0 {
					b.Annotations = nil
				}
			}
		},
		func(b *v1.Book, c randfill.Continue) {
			if c.Bool() {
				var hub v2.Book
				c.Fill(&hub)
				_ = b.ConvertFrom(&hub) // never fails
				return
			}
			c.FillNoCustom(b)
			if b.Annotations != nil {
				delete(b.Annotations, v1.StashAnnotation)
				if len(b.Annotations) == 0 {
					b.Annotations = nil
				}
			}
		},
	}
}

// Title returns a valid title: 1 to 256 characters, a sixth of the time
// exactly 1 or 256, drawn from ASCII, accented Latin, combining marks, CJK,
// emoji and whitespace of several kinds, and never only whitespace.
func Title(c randfill.Continue) string {
	return text(c, 256)
}

// Author returns a valid author: 1 to 128 characters, as Title.
func Author(c randfill.Continue) string {
	return text(c, v2.MaxAuthorLength)
}

// Authors returns nil two times in five, else 1 to 16 valid authors.
func Authors(c randfill.Continue) []string {
	if c.Intn(5) < 2 {
		return nil
	}
	n := 1 + c.Intn(v2.MaxAuthors)
	authors := make([]string, n)
	for i := range authors {
		authors[i] = Author(c)
	}
	return authors
}

// V1Price returns a valid v1 price: 0, the largest int32 or just below it
// a fifth of the time each, else any of 0 to the largest int32.
func V1Price(c randfill.Continue) int32 {
	switch c.Intn(5) {
	case 0:
		return 0
	case 1:
		return math.MaxInt32 - int32(c.Intn(3))
	default:
		return c.Int31()
	}
}

// Price returns a valid v2 price: a fourth of the time in XXX (the only
// prices v1 may say exactly), else in any currency of codes; its amount has
// 0 up to the currency's minor unit of decimal places, and before the point
// 0, a small number, a number next to the largest int32, or up to 15
// digits.
func Price(c randfill.Continue, codes []string) v2.Price {
	currency := v2.NoCurrency
	if c.Intn(4) > 0 {
		currency = codes[c.Intn(len(codes))]
	}
	minor, _ := v2.MinorUnits(currency)
	var whole string
	switch c.Intn(4) {
	case 0:
		whole = "0"
	case 1:
		whole = strconv.Itoa(c.Intn(1000))
	case 2:
		whole = strconv.FormatInt(math.MaxInt32-2+int64(c.Intn(5)), 10)
	default:
		n := 1 + c.Intn(v2.MaxIntegerDigits)
		var b strings.Builder
		b.WriteByte(byte('1' + c.Intn(9)))
		for range n - 1 {
			b.WriteByte(byte('0' + c.Intn(10)))
		}
		whole = b.String()
	}
	places := c.Intn(minor + 1)
	if places == 0 {
		return v2.Price{Amount: whole, Currency: currency}
	}
	fraction := make([]byte, places)
	for i := range fraction {
		fraction[i] = byte('0' + c.Intn(10))
	}
	return v2.Price{Amount: whole + "." + string(fraction), Currency: currency}
}

// runeRanges are the scripts text draws from, as [first, last] code points.
var runeRanges = [][2]rune{
	{' ', '~'},         // ASCII
	{0xC0, 0x17F},      // accented Latin
	{0x300, 0x36F},     // combining marks
	{0x4E00, 0x9FFF},   // CJK
	{0x1F300, 0x1FAFF}, // emoji
	{0x3000, 0x3000},   // ideographic space
	{'\t', '\t'},       // tab
	{0x00A0, 0x00A0},   // no-break space
	{0x2000, 0x200A},   // typographic spaces
	{0x0400, 0x04FF},   // Cyrillic
	{0x0600, 0x06FF},   // Arabic
	{0x1100, 0x11FF},   // Hangul jamo
	{0xFF01, 0xFF5E},   // full-width ASCII
	{0x10000, 0x1007F}, // Linear B, beyond the BMP
	{0x0E00, 0x0E7F},   // Thai
	{0x0900, 0x097F},   // Devanagari
	{0x05D0, 0x05EA},   // Hebrew
	{0x2028, 0x2029},   // line and paragraph separators
	{0x0085, 0x0085},   // next line
	{0x200B, 0x200D},   // zero-width space, joiners
	{0xFE0F, 0xFE0F},   // variation selector
	{0x1F1E6, 0x1F1FF}, // regional indicators
	{0x0041, 0x005A},   // A-Z, so that ASCII is common
	{0x0061, 0x007A},   // a-z
	{0x0030, 0x0039},   // 0-9
	{0x2460, 0x24FF},   // enclosed alphanumerics
	{0xAC00, 0xD7A3},   // Hangul syllables
	{0x3040, 0x30FF},   // kana
	{0x0370, 0x03FF},   // Greek
	{0x0020, 0x0020},   // space
	{0x000A, 0x000A},   // line feed
	{0x000D, 0x000D},   // carriage return
}

// text returns 1 to limit characters, a sixth of the time exactly 1 or limit,
// that are not only whitespace (strings.TrimSpace, which is CEL's trim()).
func text(c randfill.Continue, limit int) string {
	var n int
	switch c.Intn(6) {
	case 0:
		n = 1
	case 1:
		n = limit
	default:
		n = 1 + c.Intn(limit)
	}
	runes := make([]rune, n)
	for i := range runes {
		r := runeRanges[c.Intn(len(runeRanges))]
		runes[i] = r[0] + rune(c.Intn(int(r[1]-r[0])+1))
	}
	if strings.TrimSpace(string(runes)) == "" {
		runes[c.Intn(n)] = 'a' + rune(c.Intn(26))
	}
	return string(runes)
}

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
	"os"
	"regexp"
	"strings"
	"unicode"
)

// mdDoc is what the checks read of one Markdown file: its code spans and
// fenced lines (where paths, targets, flags, metrics and reasons are named),
// its links and the anchors its headings make. It is a scanner for the
// Markdown this repository writes (CommonMark's fences, code spans, inline
// links, ATX headings), not a full parser.
type mdDoc struct {
	// path is relative to the repository root, with slashes.
	path    string
	lines   []string
	spans   []codeSpan
	fenced  []fencedLine
	links   []mdLink
	anchors map[string]bool
}

// codeSpan is an inline code span: its text (newlines as spaces), the line
// it starts on, a little of the text before it, the text after it up to the
// end of its paragraph (of its row, in a table), and its table column.
type codeSpan struct {
	line   int
	text   string
	before string
	after  string
	// column is the span's table column (0 first) and header that column's
	// heading, when the span is in a table row; column is -1 otherwise.
	column int
	header string
}

// fencedLine is one line of a fenced code block.
type fencedLine struct {
	line int
	text string
}

// mdLink is an inline link or image: [text](target).
type mdLink struct {
	line   int
	target string
}

var (
	fenceOpen  = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$")
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(\s+#+)?\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// readMarkdown reads and scans root/rel.
func readMarkdown(root, rel string) (*mdDoc, error) {
	b, err := os.ReadFile(joinRoot(root, rel))
	if err != nil {
		return nil, err
	}
	return scanMarkdown(rel, string(b)), nil
}

// scanMarkdown splits text into fenced blocks and paragraphs and scans each.
func scanMarkdown(rel, text string) *mdDoc {
	d := &mdDoc{path: rel, lines: strings.Split(text, "\n"), anchors: map[string]bool{}}
	slugs := map[string]int{}
	var para []int // line indexes of the paragraph being gathered
	var fence string
	flush := func() {
		if len(para) > 0 {
			d.scanParagraph(para)
			para = para[:0]
		}
	}
	for i, line := range d.lines {
		if fence != "" {
			if closesFence(line, fence) {
				fence = ""
				continue
			}
			d.fenced = append(d.fenced, fencedLine{line: i + 1, text: line})
			continue
		}
		if m := fenceOpen.FindStringSubmatch(line); m != nil && !strings.Contains(m[2], "`") {
			flush()
			fence = m[1]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			flush()
			d.addAnchor(slugs, m[1])
			para = append(para, i)
			flush()
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		para = append(para, i)
	}
	flush()
	return d
}

// closesFence tells whether line closes a fence opened by open: the same
// character, at least as many, nothing after.
func closesFence(line, open string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	n := 0
	for n < len(t) && t[n] == open[0] {
		n++
	}
	return n >= len(open) && strings.TrimSpace(t[n:]) == ""
}

// addAnchor records the anchor GitHub makes for a heading: its text
// lowercased, with everything but letters, digits, spaces, hyphens and
// underscores dropped and spaces made hyphens; "-1", "-2"… on repeats.
func (d *mdDoc) addAnchor(seen map[string]int, heading string) {
	s := slug(plainText(heading))
	n := seen[s]
	seen[s] = n + 1
	if n > 0 {
		s = s + "-" + itoa(n)
	}
	d.anchors[s] = true
}

var (
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// plainText is a heading's text as GitHub renders it: links become their
// text, code and emphasis markers and HTML tags go.
func plainText(s string) string {
	s = inlineLink.ReplaceAllString(s, "$1")
	s = htmlTag.ReplaceAllString(s, "")
	return strings.NewReplacer("`", "", "**", "", "*", "").Replace(s)
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// scanParagraph finds the code spans and links of the lines at idx, which
// form one paragraph (or one table, or one heading).
func (d *mdDoc) scanParagraph(idx []int) {
	var text strings.Builder
	lineAt := make([]int, 0, 256) // lineAt[offset] = 1-based line number
	for _, i := range idx {
		text.WriteString(d.lines[i])
		text.WriteByte('\n')
		for range len(d.lines[i]) + 1 {
			lineAt = append(lineAt, i+1)
		}
	}
	s := text.String()
	header := tableHeader(d.lines, idx)
	for p := 0; p < len(s); {
		switch {
		case s[p] == '\\' && p+1 < len(s):
			p += 2
		case s[p] == '`':
			p = d.codeSpanAt(s, p, lineAt, header)
		case s[p] == '[' || (s[p] == '!' && p+1 < len(s) && s[p+1] == '['):
			p = d.linkAt(s, p, lineAt)
		default:
			p++
		}
	}
}

// codeSpanAt reads the code span opened by the backtick run at p and
// returns the offset after it; an unmatched run is literal text.
func (d *mdDoc) codeSpanAt(s string, p int, lineAt []int, header []string) int {
	n := 0
	for p+n < len(s) && s[p+n] == '`' {
		n++
	}
	run := strings.Repeat("`", n)
	for q := p + n; q < len(s); {
		k := strings.Index(s[q:], run)
		if k < 0 {
			break
		}
		e := q + k
		m := 0
		for e+m < len(s) && s[e+m] == '`' {
			m++
		}
		if m != n {
			q = e + m
			continue
		}
		body := strings.ReplaceAll(s[p+n:e], "\n", " ")
		if len(body) > 1 && body[0] == ' ' && body[len(body)-1] == ' ' && strings.TrimSpace(body) != "" {
			body = body[1 : len(body)-1]
		}
		after := s[e+m:]
		if k := strings.IndexByte(after, '\n'); k >= 0 && header == nil {
			// Within the paragraph, the sentence goes on on the next line.
			after = strings.ReplaceAll(after, "\n", " ")
		} else if k >= 0 {
			after = after[:k]
		}
		before := strings.ReplaceAll(s[max(0, p-300):p], "\n", " ")
		col, head := tableColumn(s, p, header)
		d.spans = append(d.spans, codeSpan{line: lineAt[p], text: body, before: before, after: after, column: col, header: head})
		return e + m
	}
	return p + n
}

// linkAt reads [text](target) or ![alt](target) at p; anything else is
// text. The text may hold code spans, which are recorded too.
func (d *mdDoc) linkAt(s string, p int, lineAt []int) int {
	open := p
	if s[p] == '!' {
		open++
	}
	close := matching(s, open, '[', ']')
	if close < 0 || close+1 >= len(s) || s[close+1] != '(' {
		return open + 1
	}
	end := matching(s, close+1, '(', ')')
	if end < 0 {
		return open + 1
	}
	target := strings.TrimSpace(s[close+2 : end])
	if i := strings.IndexAny(target, " \t\n"); i >= 0 {
		target = target[:i] // a title follows
	}
	target = strings.Trim(target, "<>")
	d.links = append(d.links, mdLink{line: lineAt[p], target: target})
	// The link's text is scanned as ordinary text by the caller.
	return open + 1
}

// matching returns the offset of the bracket closing the one at p, with
// nesting, skipping code spans; -1 if none before the paragraph ends.
func matching(s string, p int, open, close byte) int {
	depth := 0
	for i := p; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '`':
			j := strings.IndexByte(s[i+1:], '`')
			if j < 0 {
				return -1
			}
			i += j + 1
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// tableHeader returns the header cells when the paragraph is a table (its
// second line a delimiter row), else nil.
func tableHeader(lines []string, idx []int) []string {
	if len(idx) < 2 {
		return nil
	}
	delim := strings.TrimSpace(lines[idx[1]])
	if !strings.HasPrefix(delim, "|") || strings.Trim(delim, "|-: ") != "" {
		return nil
	}
	return splitRow(lines[idx[0]])
}

func splitRow(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(strings.TrimSuffix(row, "|"), "|")
	var cells []string
	var cur strings.Builder
	inCode := false
	for i := 0; i < len(row); i++ {
		switch c := row[i]; {
		case c == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case c == '`':
			inCode = !inCode
			cur.WriteByte(c)
		case c == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// tableColumn returns the column of offset p in its table row, and that
// column's header; -1 and "" outside a table.
func tableColumn(s string, p int, header []string) (int, string) {
	if header == nil {
		return -1, ""
	}
	start := strings.LastIndexByte(s[:p], '\n') + 1
	col, inCode := -1, false
	for i := start; i < p; i++ {
		switch {
		case s[i] == '\\':
			i++
		case s[i] == '`':
			inCode = !inCode
		case s[i] == '|' && !inCode:
			col++
		}
	}
	if strings.TrimSpace(s[start:p]) != "" && !strings.HasPrefix(strings.TrimSpace(s[start:]), "|") {
		col++
	}
	if col < 0 {
		col = 0
	}
	if col < len(header) {
		return col, header[col]
	}
	return col, ""
}

package localcluster

import (
	"bytes"
	"sync"
	"testing"
)

func TestPrefixWriterTagsWholeLines(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	a := newPrefixWriter(&mu, &out, "a")
	b := newPrefixWriter(&mu, &out, "b")
	a.Write([]byte("one\ntw"))
	b.Write([]byte("x\n"))
	a.Write([]byte("o\n"))
	if got, want := out.String(), "a | one\nb | x\na | two\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

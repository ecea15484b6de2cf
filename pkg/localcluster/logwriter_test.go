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

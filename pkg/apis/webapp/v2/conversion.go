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

// Hub marks v2 Book as the hub of conversion, as controller-runtime's
// conversion.Hub names it: every other version converts to and from v2
// (v1.Book.ConvertTo, v1.Book.ConvertFrom), never to each other, and v2 is
// the version the API server stores.
func (*Book) Hub() {}

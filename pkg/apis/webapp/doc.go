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

// Package webapp holds the versions of the webapp.ydzs.io API group, one
// subpackage each.
// fork:begin v2
// v2, the hub and storage version, in the v2 subpackage, and v1, deprecated
// and converted to and from v2, in the v1 subpackage (docs/api-versions.md).
// fork:end v2
package webapp

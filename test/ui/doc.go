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

// Package ui tests the live view of the controller (pkg/ui) in a real
// browser: headless Chromium, driven through the DevTools protocol by
// chromedp, loads the page from the built controller running against a
// local control plane. It is a module of its own so that chromedp stays out
// of the product's go.mod; `make test-ui` runs it, installing Debian's
// chromium and chromium-driver when they are missing.
package ui

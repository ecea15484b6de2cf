// Package ui tests the live view of the controller (pkg/ui) in a real
// browser: headless Chromium, driven through the DevTools protocol by
// chromedp, loads the page from the built controller running against a
// local control plane. It is a module of its own so that chromedp stays out
// of the product's go.mod; `make test-ui` runs it, installing Debian's
// chromium and chromium-driver when they are missing.
package ui

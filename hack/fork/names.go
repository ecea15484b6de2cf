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

package main

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/mod/module"
)

// names are what a fork calls everything this project calls Book,
// webapp.ydzs.io, v1 and book-controller.
type names struct {
	Module    string // example.com/widget-controller
	Group     string // apps.example.com
	GroupPkg  string // apps: the Go package and the generated clients' group name
	Version   string // v1alpha1
	Kind      string // Widget
	Plural    string // widgets
	ShortName string // wt
	Name      string // widget-controller: binary, image, Lease, field manager, labels
}

// usageError is bad input: one line naming the flag and its rule; exit 2.
type usageError struct{ flag, msg string }

func (e *usageError) Error() string { return fmt.Sprintf("--%s: %s", e.flag, e.msg) }

var (
	// dns1123Label is Kubernetes' DNS-1123 label (IsDNS1123Label).
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// kubeVersion is what Kubernetes accepts as an API version and sorts
	// (k8s.io/apimachinery/pkg/version.CompareKubeAwareVersionStrings).
	kubeVersion = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	// upperCamel: a kind as Kubernetes writes one, Deployment, CronJob.
	upperCamel = regexp.MustCompile(`^[A-Z][a-z0-9]+([A-Z][a-z0-9]+)*$`)
	lowerWord  = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
)

// checkModule: a module path the go command accepts.
func checkModule(p string) error {
	if p == "" {
		return &usageError{"module", "is required (a Go module path such as example.com/widget-controller)"}
	}
	if err := module.CheckPath(p); err != nil {
		return &usageError{"module", fmt.Sprintf("%q is not a valid Go module path: %v", p, err)}
	}
	return nil
}

// checkGroup: a DNS-1123 subdomain with at least one dot, as a CRD's group
// must be (apiextensions' validation: spec.group must contain a '.').
func checkGroup(g string) error {
	rule := "must be a DNS-1123 subdomain with a dot, such as apps.example.com"
	if g == "" {
		return &usageError{"group", "is required: " + rule}
	}
	if len(g) > 253 || !strings.Contains(g, ".") {
		return &usageError{"group", fmt.Sprintf("%q %s", g, rule)}
	}
	for _, label := range strings.Split(g, ".") {
		if len(label) > 63 || !dns1123Label.MatchString(label) {
			return &usageError{"group", fmt.Sprintf("%q %s", g, rule)}
		}
	}
	if !unicode.IsLetter(rune(g[0])) {
		return &usageError{"group", fmt.Sprintf("%q must start with a letter: its first label names the Go package", g)}
	}
	return nil
}

func checkVersion(v string) error {
	if !kubeVersion.MatchString(v) {
		return &usageError{"version", fmt.Sprintf("%q is not a Kubernetes API version (v1, v1alpha1, v2beta3)", v)}
	}
	return nil
}

func checkKind(k string) error {
	if !upperCamel.MatchString(k) {
		return &usageError{"kind", fmt.Sprintf("%q must be UpperCamelCase, letters and digits (Widget, CronJob)", k)}
	}
	return nil
}

// pluralOf is the lower-case plural of kind: y after a consonant -> ies;
// s, x, z, ch, sh -> es; else +s (Policy: policies, Box: boxes).
func pluralOf(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsRune("aeiou", rune(k[len(k)-2])):
		return k[:len(k)-1] + "ies"
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "z"),
		strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	}
	return k + "s"
}

// shortNameOf: the kind's first letter and its last consonant (Book: bk,
// Widget: wt, Policy: pc), as the bk of this project.
func shortNameOf(kind string) string {
	k := strings.ToLower(kind)
	for i := len(k) - 1; i > 0; i-- {
		if c := k[i]; c >= 'a' && c <= 'z' && !strings.ContainsRune("aeiouy", rune(c)) {
			return k[:1] + string(c)
		}
	}
	return k
}

// newNames checks the flags and derives every name from them.
func newNames(mod, group, version, kind, plural, short string) (names, error) {
	for _, err := range []error{checkModule(mod), checkGroup(group), checkVersion(version), checkKind(kind)} {
		if err != nil {
			return names{}, err
		}
	}
	if plural == "" {
		plural = pluralOf(kind)
	} else if !lowerWord.MatchString(plural) || plural == strings.ToLower(kind) {
		return names{}, &usageError{"plural", fmt.Sprintf("%q must be lower-case letters and digits, not the kind itself", plural)}
	}
	if short == "" {
		short = shortNameOf(kind)
	} else if !lowerWord.MatchString(short) {
		return names{}, &usageError{"short-name", fmt.Sprintf("%q must be lower-case letters and digits", short)}
	}
	gp := strings.Split(group, ".")[0]
	gp = strings.ReplaceAll(gp, "-", "")
	return names{
		Module: mod, Group: group, GroupPkg: gp, Version: version, Kind: kind,
		Plural: plural, ShortName: short, Name: strings.ToLower(kind) + "-controller",
	}, nil
}

// upperFirst: apps -> Apps, v1alpha1 -> V1alpha1.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// capPlural is the plural as Go identifiers write it after the kind:
// Widget, widgets -> Widgets; Policy, policies -> Policies.
func (n names) capPlural() string {
	lk := strings.ToLower(n.Kind)
	i := 0
	for i < len(lk) && i < len(n.Plural) && lk[i] == n.Plural[i] {
		i++
	}
	return n.Kind[:i] + n.Plural[i:]
}

// renamer is every rename, in one regular expression so that a replaced
// text is never replaced again. The alternatives are tried in order.
type renamer struct {
	re   *regexp.Regexp
	repl func(string) string
}

func newRenamer(n names) *renamer {
	lk, uk := strings.ToLower(n.Kind), strings.ToUpper(n.Kind)
	snake := strings.ReplaceAll(n.Name, "-", "_")
	fixed := map[string]string{
		"ydzs.io/book-controller": n.Module,
		"webapp.ydzs.io":          n.Group,
		"ydzs.io":                 n.Group,
		"webapp":                  n.GroupPkg,
		"Webapp":                  upperFirst(n.GroupPkg),
		// Watch bookmarks are client-go's, not ours.
		"Bookmark": "Bookmark", "bookmark": "bookmark", "BOOKMARK": "BOOKMARK",
		"book-controller": n.Name,
		"book_controller": snake,
		"Books":           n.capPlural(),
		"books":           n.Plural,
		"BOOKS":           strings.ToUpper(n.Plural),
		"Book":            n.Kind,
		"book":            lk,
		"BOOK":            uk,
		"bk":              n.ShortName,
	}
	// The version the controller uses, v2, which a fork keeps alone (the
	// part "v2" leaves v1 out): only where it follows the group or its
	// package (webapp.ydzs.io/v2, pkg/apis/webapp/v2, webappv2, WebappV2);
	// v2 alone is everyone's.
	versioned := `(?:webapp\.ydzs\.io/|webapp/|webapp_|webapp|Webapp\(\)\.|Webapp|apiswebapp|typedwebapp|fakewebapp|applyconfigurationwebapp)[vV]2(?:(?:alpha|beta)[0-9]+)?`
	re := regexp.MustCompile(versioned + `|ydzs\.io/book-controller|webapp\.ydzs\.io|ydzs\.io|webapp|Webapp|Bookmark|bookmark|BOOKMARK|book-controller|book_controller|Books|books|BOOKS|Book|book|BOOK|\bbk\b`)
	versionedRE := regexp.MustCompile(`^(.*?)([vV])2((?:alpha|beta)[0-9]+)?$`)
	r := &renamer{re: re}
	r.repl = func(m string) string {
		if r, ok := fixed[m]; ok {
			return r
		}
		p := versionedRE.FindStringSubmatch(m)
		prefix, v, rest := p[1], p[2], p[3]
		if rest != "" { // webapp.ydzs.io/v2beta1: a version that is not ours
			return r.rename(prefix) + v + "2" + rest
		}
		var head string
		switch {
		case prefix == "webapp.ydzs.io/":
			head = n.Group + "/"
		case prefix == "webapp/", prefix == "webapp_":
			head = n.GroupPkg + prefix[len("webapp"):]
		case prefix == "Webapp().":
			head = upperFirst(n.GroupPkg) + "()."
		case strings.HasSuffix(prefix, "Webapp"):
			head = strings.TrimSuffix(prefix, "Webapp") + upperFirst(n.GroupPkg)
		default:
			head = strings.TrimSuffix(prefix, "webapp") + n.GroupPkg
		}
		ver := n.Version
		if v == "V" {
			ver = upperFirst(ver)
		}
		return head + ver
	}
	return r
}

func (r *renamer) rename(s string) string { return r.re.ReplaceAllStringFunc(s, r.repl) }

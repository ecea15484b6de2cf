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

package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	// fork:begin v2
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	// fork:end v2
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

const (
	// crdFile is the Book CRD.
	crdFile    = "crd.yaml"
	validDir   = "examples"
	invalidDir = "examples/invalid"
	// fork:begin v2
	validV2Dir   = "examples/v2"
	invalidV2Dir = "examples/v2/invalid"
	// fork:end v2
	// sampleFile is the lesson's sample Book; it must stay among the examples.
	sampleFile = "examples/book-sample.yaml"
	// minInvalid is the fewest invalid examples we accept: one per rule
	// the schema enforces, and then some.
	minInvalid = 8
	// fork:begin v2
	// minInvalidV2 is minInvalid for v2.
	minInvalidV2 = 12
	// fork:end v2
)

// crdFiles are the CRDs update-codegen.sh writes.
var crdFiles = []string{crdFile}

// readSingleDoc returns the one YAML document in path. Documents that hold
// nothing but comments (such as the header before crd.yaml's "---") are
// skipped; any other number of documents than one fails the test.
func readSingleDoc(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: splitting YAML documents: %v", path, err)
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("%s: invalid YAML: %v", path, err)
		}
		if s := string(bytes.TrimSpace(j)); s == "null" || s == "" {
			continue
		}
		docs = append(docs, doc)
	}
	if len(docs) != 1 {
		t.Fatalf("%s: want exactly one YAML document, found %d", path, len(docs))
	}
	return docs[0]
}

// loadCRD reads crdFile strictly (unknown or duplicate fields fail) and
// returns it as sent (v1) and as the API server validates it (internal,
// defaulted, with the status PrepareForCreate would give it).
func loadCRD(t *testing.T, crdFile string) (*apiextensionsv1.CustomResourceDefinition, *apiextensions.CustomResourceDefinition) {
	t.Helper()
	v1crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(readSingleDoc(t, crdFile), v1crd); err != nil {
		t.Fatalf("%s: strict decoding into apiextensions.k8s.io/v1 CustomResourceDefinition: %v", crdFile, err)
	}
	if v1crd.APIVersion != "apiextensions.k8s.io/v1" || v1crd.Kind != "CustomResourceDefinition" {
		t.Fatalf("%s: want apiextensions.k8s.io/v1 CustomResourceDefinition, got %s %s", crdFile, v1crd.APIVersion, v1crd.Kind)
	}

	defaulted := v1crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(defaulted)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(defaulted, internal, nil); err != nil {
		t.Fatalf("%s: converting to the internal version: %v", crdFile, err)
	}
	// What the CRD registry's PrepareForCreate does before validating.
	internal.Status = apiextensions.CustomResourceDefinitionStatus{}
	internal.Generation = 1
	for _, v := range internal.Spec.Versions {
		if v.Storage {
			internal.Status.StoredVersions = []string{v.Name}
			break
		}
	}
	return v1crd, internal
}

func errorLines(errs field.ErrorList) string {
	lines := make([]string, len(errs))
	for i, err := range errs {
		lines[i] = "  " + err.Error()
	}
	return strings.Join(lines, "\n")
}

// TestCRDIsValid runs the validation the API server runs when the CRD is
// created: names, versions, schema (structural, CEL rules compiling and
// within their cost budget, list-type invariants), printer columns.
func TestCRDIsValid(t *testing.T) {
	for _, crdFile := range crdFiles {
		_, crd := loadCRD(t, crdFile)
		if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), crd); len(errs) > 0 {
			t.Errorf("%s: the API server would reject this CRD:\n%s", crdFile, errorLines(errs))
		}
	}
}

func TestCRDSchemaIsStructural(t *testing.T) {
	for _, crdFile := range crdFiles {
		testCRDSchemaIsStructural(t, crdFile)
	}
}

func testCRDSchemaIsStructural(t *testing.T, crdFile string) {
	_, crd := loadCRD(t, crdFile)
	for i, v := range crd.Spec.Versions {
		validation, err := apiextensions.GetSchemaForVersion(crd, v.Name)
		if err != nil {
			t.Fatalf("%s: version %s: %v", crdFile, v.Name, err)
		}
		if validation == nil || validation.OpenAPIV3Schema == nil {
			t.Errorf("%s: version %s has no openAPIV3Schema", crdFile, v.Name)
			continue
		}
		s, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
		if err != nil {
			t.Errorf("%s: version %s: schema is not structural: %v", crdFile, v.Name, err)
			continue
		}
		fldPath := field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema")
		if errs := structuralschema.ValidateStructural(fldPath, s); len(errs) > 0 {
			t.Errorf("%s: version %s: schema is not structural:\n%s", crdFile, v.Name, errorLines(errs))
		}
	}
}

func TestCRDNames(t *testing.T) {
	for _, crdFile := range crdFiles {
		testCRDNames(t, crdFile)
	}
}

func testCRDNames(t *testing.T, crdFile string) {
	crd, _ := loadCRD(t, crdFile)
	wantName := "books." + webappv2.GroupName
	if crd.Name != wantName {
		t.Errorf("%s: metadata.name = %q, want %q", crdFile, crd.Name, wantName)
	}
	if crd.Spec.Group != webappv2.GroupName {
		t.Errorf("%s: spec.group = %q, want %q", crdFile, crd.Spec.Group, webappv2.GroupName)
	}
	n := crd.Spec.Names
	for _, c := range []struct{ field, got, want string }{
		{"plural", n.Plural, "books"},
		{"singular", n.Singular, "book"},
		{"kind", n.Kind, "Book"},
		{"listKind", n.ListKind, "BookList"},
	} {
		if c.got != c.want {
			t.Errorf("%s: spec.names.%s = %q, want %q", crdFile, c.field, c.got, c.want)
		}
	}
	if !slices.Equal(n.ShortNames, []string{"bk"}) {
		t.Errorf("%s: spec.names.shortNames = %q, want [bk]", crdFile, n.ShortNames)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("%s: spec.scope = %q, want %q", crdFile, crd.Spec.Scope, apiextensionsv1.NamespaceScoped)
	}
}

// TestCRDVersions: crd.yaml stores the version the controller uses, and
// serves it, not deprecated, with its printer columns. Any other version
// is served, deprecated (versions_test.go checks v1 and the conversion);
// with one version there is nothing to convert.
func TestCRDVersions(t *testing.T) {
	crd, _ := loadCRD(t, crdFile)
	ours := webappv2.SchemeGroupVersion.Version
	var stored []string
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			stored = append(stored, v.Name)
		}
		switch {
		case v.Name == ours && (!v.Served || v.Deprecated):
			t.Errorf("%s: version %s served=%v deprecated=%v, want served, not deprecated: the controller uses it", crdFile, v.Name, v.Served, v.Deprecated)
		case v.Name == ours:
			checkVersion(t, crdFile, v, v2Columns)
		case !v.Deprecated:
			t.Errorf("%s: version %s is not deprecated; %s is the one to use", crdFile, v.Name, ours)
		}
	}
	if !slices.Equal(stored, []string{ours}) {
		t.Errorf("%s: stored versions %q, want [%s], the controller's", crdFile, stored, ours)
	}
	if c := crd.Spec.Conversion; len(crd.Spec.Versions) == 1 && c != nil && c.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("%s: conversion strategy %s; with one version there is nothing to convert", crdFile, c.Strategy)
	}
}

// The printer columns of each version, as `kubectl get books` shows them.
var (
	// fork:begin v2
	v1Columns = []column{
		{"Title", "string", ".spec.title"},
		{"Price", "integer", ".spec.price"},
		{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`},
		{"Age", "date", ".metadata.creationTimestamp"},
	}
	// fork:end v2
	v2Columns = []column{
		{"Title", "string", ".spec.title"},
		{"Price", "string", ".spec.price.amount"},
		{"Currency", "string", ".spec.price.currency"},
		{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`},
		{"Age", "date", ".metadata.creationTimestamp"},
	}
)

type column struct{ Name, Type, JSONPath string }

// checkVersion checks that v has the status subresource and the columns.
func checkVersion(t *testing.T, crdFile string, v apiextensionsv1.CustomResourceDefinitionVersion, columns []column) {
	t.Helper()
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("%s: version %s has no status subresource; the controller writes status through it", crdFile, v.Name)
	}
	var got []column
	for _, c := range v.AdditionalPrinterColumns {
		got = append(got, column{c.Name, c.Type, c.JSONPath})
	}
	if !slices.Equal(got, columns) {
		t.Errorf("%s: version %s printer columns:\n  got  %+v\n  want %+v", crdFile, v.Name, got, columns)
	}
}

// TestCRDSpecFieldsHaveDescriptions: kubectl explain book.spec shows them, so
// every field a user may set must say what it is for.
func TestCRDSpecFieldsHaveDescriptions(t *testing.T) {
	for _, crdFile := range crdFiles {
		testCRDSpecFieldsHaveDescriptions(t, crdFile)
	}
}

func testCRDSpecFieldsHaveDescriptions(t *testing.T, crdFile string) {
	crd, _ := loadCRD(t, crdFile)
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			t.Errorf("%s: version %s has no openAPIV3Schema", crdFile, v.Name)
			continue
		}
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			t.Errorf("%s: version %s schema has no spec", crdFile, v.Name)
			continue
		}
		var missing []string
		var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
		walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
			if strings.TrimSpace(s.Description) == "" {
				missing = append(missing, path)
			}
			for _, name := range slices.Sorted(func(yield func(string) bool) {
				for k := range s.Properties {
					if !yield(k) {
						return
					}
				}
			}) {
				p := s.Properties[name]
				walk(path+"."+name, &p)
			}
			// A list of strings (spec.authors) is described by the list's
			// own description; a list of objects needs its items described.
			if s.Items != nil && s.Items.Schema != nil && s.Items.Schema.Type == "object" {
				walk(path+"[*]", s.Items.Schema)
			}
			if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				walk(path+"[*]", s.AdditionalProperties.Schema)
			}
		}
		walk("spec", &spec)
		if len(spec.Properties) == 0 {
			t.Errorf("%s: version %s: spec has no properties", crdFile, v.Name)
		}
		if len(missing) > 0 {
			t.Errorf("%s: version %s: these fields have no description (add a Go doc comment in pkg/apis and run hack/update-codegen.sh): %s",
				crdFile, v.Name, strings.Join(missing, ", "))
		}
	}
}

// bookValidator does to a Book what the API server does on create, with the
// same code: k8s.io/apiextensions-apiserver's crdHandler and
// unstructuredSchemaCoercer (version check, pruning, unknown fields) and
// customResourceStrategy.Validate (type meta, object meta, OpenAPI schema,
// list types, CEL rules).
type bookValidator struct {
	group, kind string
	versions    map[string]*versionValidator // served versions only
	served      []string                     // their apiVersions, sorted
}

type versionValidator struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator // nil when the schema has no x-kubernetes-validations
}

func newBookValidator(t *testing.T, crdFile string, crd *apiextensions.CustomResourceDefinition) *bookValidator {
	t.Helper()
	bv := &bookValidator{group: crd.Spec.Group, kind: crd.Spec.Names.Kind, versions: map[string]*versionValidator{}}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		validation, err := apiextensions.GetSchemaForVersion(crd, v.Name)
		if err != nil || validation == nil || validation.OpenAPIV3Schema == nil {
			t.Fatalf("%s: version %s: no schema (%v)", crdFile, v.Name, err)
		}
		s, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
		if err != nil {
			t.Fatalf("%s: version %s: schema is not structural: %v", crdFile, v.Name, err)
		}
		sv, _, err := apiservervalidation.NewSchemaValidator(validation.OpenAPIV3Schema)
		if err != nil {
			t.Fatalf("%s: version %s: building the schema validator: %v", crdFile, v.Name, err)
		}
		bv.versions[v.Name] = &versionValidator{
			structural: s,
			schema:     sv,
			cel:        cel.NewValidator(s, true, celconfig.PerCallLimit),
		}
		bv.served = append(bv.served, crd.Spec.Group+"/"+v.Name)
	}
	slices.Sort(bv.served)
	return bv
}

// blockingErrorTypes are the errors after which the API server skips the CEL
// rules (customresource.hasBlockingErr).
var blockingErrorTypes = []field.ErrorType{
	field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong,
	field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid,
}

// validate returns the errors the API server would answer a create of obj
// with, and the warnings it would send with a success. strict is
// fieldValidation=Strict: unknown fields are errors instead of warnings.
// obj is modified (pruned) as the server would.
func (bv *bookValidator) validate(obj map[string]any, strict bool) (errs, warnings []string) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	vv := bv.versions[gv.Version]
	if err != nil || gv.Group != bv.group || vv == nil {
		// kubectl: no matches for kind "Book" in version "webapp.ydzs.io/v3alpha1";
		// the server, sent it for a served version: the API version in the
		// data does not match the expected API version.
		return []string{field.NotSupported(field.NewPath("apiVersion"), apiVersion, bv.served).Error()}, nil
	}
	if kind != bv.kind {
		return []string{field.Invalid(field.NewPath("kind"), kind, "must be "+bv.kind).Error()}, nil
	}

	// Decoding: unknown fields are pruned, and reported.
	meta, _, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return []string{fmt.Sprintf("metadata: %v", err)}, nil
	}
	unknown = append(unknown, pruning.PruneWithOptions(obj, vv.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, vv.structural)
	structuraldefaulting.Default(obj, vv.structural)
	for _, path := range unknown {
		if strict {
			errs = append(errs, fmt.Sprintf("strict decoding error: unknown field %q", path))
		} else {
			warnings = append(warnings, fmt.Sprintf("unknown field %q", path))
		}
	}
	if len(errs) > 0 {
		return errs, warnings // 400 Bad Request before any validation
	}

	// Validation.
	var fieldErrs field.ErrorList
	if meta == nil {
		meta = &metav1.ObjectMeta{}
	}
	meta = meta.DeepCopy()
	if meta.Namespace == "" {
		meta.Namespace = "default" // the request's namespace (kubectl -n)
	}
	fieldErrs = append(fieldErrs, metavalidation.ValidateObjectMeta(meta, true, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	fieldErrs = append(fieldErrs, apiservervalidation.ValidateCustomResource(nil, obj, vv.schema)...)
	fieldErrs = append(fieldErrs, structurallisttype.ValidateListSetsAndMaps(nil, vv.structural, obj)...)
	if vv.cel != nil {
		if slices.ContainsFunc(fieldErrs, func(e *field.Error) bool { return slices.Contains(blockingErrorTypes, e.Type) }) {
			fieldErrs = append(fieldErrs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		} else {
			celErrs, _ := vv.cel.Validate(context.Background(), nil, vv.structural, obj, nil, celconfig.RuntimeCELCostBudget)
			fieldErrs = append(fieldErrs, celErrs...)
		}
	}
	for _, e := range fieldErrs {
		errs = append(errs, e.Error())
	}
	return errs, warnings
}

// header is what an example's leading "#" lines say about it.
type header struct {
	comments        []string // every leading comment line, without "#"
	expect          string   // "# expect: X": an error must contain X
	fieldValidation string   // "# fieldValidation: Strict|Warn|Ignore"
}

func parseHeader(path string, data []byte) (header, error) {
	var h header
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			break
		}
		text = strings.TrimSpace(text)
		h.comments = append(h.comments, text)
		key, value, ok := strings.Cut(text, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(key) {
		case "expect":
			if h.expect != "" || value == "" {
				return h, fmt.Errorf("%s: want exactly one non-empty '# expect:' line", path)
			}
			h.expect = value
		case "fieldValidation":
			if !slices.Contains([]string{"Strict", "Warn", "Ignore"}, value) {
				return h, fmt.Errorf("%s: '# fieldValidation: %s': want Strict, Warn or Ignore", path, value)
			}
			h.fieldValidation = value
		}
	}
	return h, nil
}

type example struct {
	path   string
	header header
	raw    []byte // the whole file
	yaml   []byte // its one document
	json   []byte
}

// object decodes a fresh copy of the example the way the API server decodes
// a request body: integers as int64, floats as float64.
func (e *example) object(t *testing.T) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := utiljson.Unmarshal(e.json, &obj); err != nil {
		t.Fatalf("%s: decoding: %v", e.path, err)
	}
	if obj == nil {
		t.Fatalf("%s: not a YAML object", e.path)
	}
	return obj
}

func loadExamples(t *testing.T, dir string) []*example {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if yml, _ := filepath.Glob(filepath.Join(dir, "*.yml")); len(yml) > 0 {
		t.Errorf("%s: name these .yaml, or the tests skip them: %s", dir, strings.Join(yml, ", "))
	}
	var examples []*example
	names := map[string]string{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h, err := parseHeader(path, data)
		if err != nil {
			t.Fatal(err)
		}
		doc := readSingleDoc(t, path)
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		e := &example{path: path, header: h, raw: data, yaml: doc, json: j}
		obj := e.object(t)
		md, _ := obj["metadata"].(map[string]any)
		if ns, ok := md["namespace"]; ok {
			t.Errorf("%s: metadata.namespace is %v; leave it out so that `kubectl apply -n NAMESPACE -f` works", path, ns)
		}
		name, _ := md["name"].(string)
		if other, dup := names[name]; dup && name != "" {
			t.Errorf("%s and %s are both named %q; applying the directory would make one overwrite the other", other, path, name)
		}
		names[name] = path
		examples = append(examples, e)
	}
	return examples
}

// TestExamples checks that every Book in examples/ would be created and every
// Book in examples/invalid/ would be refused, with an error naming the field
// its "# expect:" line gives: the v1 examples by every CRD, and the examples
// of each other version by the CRD that serves it.
func TestExamples(t *testing.T) {
	for _, c := range []struct {
		crdFile, validDir, invalidDir, sample string
		minInvalid                            int
	}{
		{crdFile, validDir, invalidDir, sampleFile, minInvalid},
		// fork:begin v2
		{crdFile, validV2Dir, invalidV2Dir, "", minInvalidV2},
		// fork:end v2
	} {
		t.Run(c.crdFile+"/"+c.validDir, func(t *testing.T) {
			testExamples(t, c.crdFile, c.validDir, c.invalidDir, c.sample, c.minInvalid)
		})
	}
}

func testExamples(t *testing.T, crdFile, validDir, invalidDir, sampleFile string, minInvalid int) {
	_, crd := loadCRD(t, crdFile)
	bv := newBookValidator(t, crdFile, crd)

	valid := loadExamples(t, validDir)
	invalid := loadExamples(t, invalidDir)
	if len(valid) == 0 {
		t.Fatalf("%s: no valid example Books", validDir)
	}
	if sampleFile != "" && !slices.ContainsFunc(valid, func(e *example) bool { return e.path == filepath.FromSlash(sampleFile) }) {
		t.Errorf("%s is missing: it is the lesson's sample", sampleFile)
	}
	if len(invalid) < minInvalid {
		t.Fatalf("%s: %d invalid example Books, want at least %d", invalidDir, len(invalid), minInvalid)
	}

	for _, e := range valid {
		t.Run("valid/"+filepath.Base(e.path), func(t *testing.T) {
			if e.header.expect != "" || e.header.fieldValidation != "" {
				t.Errorf("%s has '# expect:' or '# fieldValidation:' but is among the valid examples; move it to %s", e.path, invalidDir)
			}
			// Valid examples must pass even under strict field validation:
			// nothing in them may be silently dropped.
			errs, _ := bv.validate(e.object(t), true)
			if len(errs) > 0 {
				t.Errorf("%s must be accepted, but the API server would reject it:\n  %s", e.path, strings.Join(errs, "\n  "))
			}
			// The controller must be able to read what the API server stores.
			var book any
			switch e.object(t)["apiVersion"] {
			case webappv2.SchemeGroupVersion.String():
				book = &webappv2.Book{}
			// fork:begin v2
			case webappv1.SchemeGroupVersion.String():
				book = &webappv1.Book{}
			// fork:end v2
			default:
				t.Fatalf("%s: apiVersion %v is not one the types know", e.path, e.object(t)["apiVersion"])
			}
			if err := yaml.UnmarshalStrict(e.yaml, book); err != nil {
				t.Errorf("%s: strict decoding into %T: %v", e.path, book, err)
			}
		})
	}

	for _, e := range invalid {
		t.Run("invalid/"+filepath.Base(e.path), func(t *testing.T) {
			h := e.header
			if !bytes.HasPrefix(e.raw, []byte("#")) {
				t.Errorf("%s: must start with a '#' comment saying why it is invalid", e.path)
			}
			if h.expect == "" {
				t.Fatalf("%s: has no '# expect: FIELD' line naming what the error must mention", e.path)
			}
			why := ""
			if len(h.comments) > 0 {
				why = h.comments[0]
			}
			strict := h.fieldValidation == "Strict"
			errs, _ := bv.validate(e.object(t), strict)
			switch {
			case len(errs) == 0:
				t.Errorf("%s must be rejected (fieldValidation=%s), but the API server would accept it; it says: %s",
					e.path, orDefault(h.fieldValidation), why)
			case !slices.ContainsFunc(errs, func(s string) bool { return strings.Contains(s, h.expect) }):
				t.Errorf("%s is rejected, but no error mentions %q (from '# expect:'):\n  %s", e.path, h.expect, strings.Join(errs, "\n  "))
			}

			if strict {
				// What makes it invalid is only the unknown field: without
				// strict validation the server prunes it, warns, and creates.
				errs, warnings := bv.validate(e.object(t), false)
				if len(errs) > 0 {
					t.Errorf("%s: without fieldValidation=Strict it must be accepted (only %s is wrong), but got:\n  %s",
						e.path, h.expect, strings.Join(errs, "\n  "))
				}
				if !slices.ContainsFunc(warnings, func(s string) bool { return strings.Contains(s, h.expect) }) {
					t.Errorf("%s: without fieldValidation=Strict, want a warning about %q, got %q", e.path, h.expect, warnings)
				}
			}
		})
	}
}

func orDefault(fieldValidation string) string {
	if fieldValidation == "" {
		return "default"
	}
	return fieldValidation
}

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

// Package migration_test runs pkg/migration in-process against a real
// kube-apiserver, etcd and kube-controller-manager, whose
// storage-version-migrator-controller rewrites the objects. To stay
// independent of the Book conversion webhook, each test uses a CRD of its
// own in the group migration.test.ydzs.io, with versions v1 and v2 of the
// same schema and conversion None.
package migration_test

import (
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.Main(m, false, &env) }

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
	"os"
)

// Files under Options.Dir for the audit log.
const (
	auditPolicyFile = "audit-policy.yaml"
	auditLogFile    = "audit.log"
)

// auditPolicy records who wrote what, for tests that must prove it from the
// API server's side rather than from a client's logs: every write to Books
// (and their status), ConfigMaps and Events at Metadata level (verb, object,
// user agent, timestamps, response code), and every write to a Lease at
// RequestResponse level, whose bodies say who the holder became, when it
// was renewed and which version of the Lease that stored, so leadership
// intervals can be derived too. Each is recorded at both ends, its start
// and its answer. Reads and watches are not recorded; they would dwarf the
// rest.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
# Each request is recorded when it begins (RequestReceived) and when it has
# been answered (ResponseComplete, which carries both times): a reader can
# then tell whether every request begun before some moment has been answered
# and recorded (test/integration/framework's AuditLog), instead of guessing
# how long a write may take.
omitStages: []
rules:
- level: RequestResponse
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: "webapp.ydzs.io"
    resources: ["books", "books/status"]
  - group: ""
    resources: ["configmaps", "events"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: None
`

// auditArgs are kube-apiserver's flags for the audit log, which it appends
// to AuditLogPath across restarts. The log backend's default mode,
// blocking, writes each event before the request is answered, and without
// --audit-log-maxsize the file is never rotated: a test reading the file
// after a request has returned finds its line.
func (c *Cluster) auditArgs() ([]string, error) {
	if !c.st.AuditLog {
		return nil, nil
	}
	if err := os.WriteFile(c.path(auditPolicyFile), []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	return []string{
		"--audit-policy-file=" + c.path(auditPolicyFile),
		"--audit-log-path=" + c.AuditLogPath(),
		"--audit-log-mode=blocking",
		"--audit-log-format=json",
	}, nil
}

// AuditLogPath is the API server's audit log (JSON lines, audit.k8s.io/v1
// Events), or "" when the cluster was started without Options.AuditLog.
func (c *Cluster) AuditLogPath() string {
	if !c.st.AuditLog {
		return ""
	}
	return c.path(auditLogFile)
}

// Package webapp holds the versions of the webapp.ydzs.io API group: v2, the
// hub and storage version, in the v2 subpackage, and v1, deprecated and
// converted to and from v2, in the v1 subpackage (docs/api-versions.md).
package webapp

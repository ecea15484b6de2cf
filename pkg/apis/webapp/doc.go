// Package webapp holds the versions of the webapp.ydzs.io API group; the
// served version is in the v1 subpackage.
package webapp

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

package controller

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// refusalError is the API server's considered "no" to one of our ConfigMap
// writes: an admission policy or webhook that denies it, a webhook that
// cannot be called and fails closed, a quota that is full, a role that does
// not allow it. Unlike an outage, it will be the same answer on the next
// try, until an operator acts; and what they do (delete a policy, raise a
// quota) raises no event of ours. So the Book says why, in its Ready
// condition and one Warning event, and the key is retried with the queue's
// backoff capped at the conflict recheck (controller.go, reconcileHandler):
// a handful of tries in the first seconds, then one per recheck, never a
// hot loop, and Ready again within one recheck of the fix.
//
// The API server gives no structured cause for most of these, only a status
// code and a message; the messages matched here are kube-apiserver's own
// (k8s.io/apiserver's quota and admission plugins), and one that matches
// none still ends in ConfigMapAdmissionDenied or ConfigMapForbidden by its
// status code.
type refusalError struct {
	reason string // the Ready condition's reason
	what   string // what refused, for the condition's message
	err    error  // the API server's answer, wrapped with what we tried
}

func (r *refusalError) Error() string { return r.err.Error() }
func (r *refusalError) Unwrap() error { return r.err }

// maxRefusalMessage bounds the server's message in the Ready condition: a
// webhook's message is not ours to trust with the Book's size.
const maxRefusalMessage = 1024

// asRefusal returns err as a refusalError if the API server refused the
// write for good, and nil for anything a retry may cure (a conflict, a
// timeout, 429, 500 from etcd).
func asRefusal(err error) *refusalError {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return nil
	}
	msg := status.Status().Message
	switch {
	case apierrors.IsForbidden(err) && (strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "status unknown for quota")):
		return &refusalError{reason: ReasonConfigMapQuotaExceeded, what: "a ResourceQuota is full", err: err}
	case apierrors.IsInternalError(err) && strings.Contains(msg, "failed calling webhook"):
		return &refusalError{reason: ReasonConfigMapAdmissionError, what: "an admission webhook failed", err: err}
	case strings.Contains(msg, "denied request") || strings.Contains(msg, "denied the request"):
		return &refusalError{reason: ReasonConfigMapAdmissionDenied, what: "admission denied it", err: err}
	case apierrors.IsInvalid(err):
		return &refusalError{reason: ReasonConfigMapAdmissionDenied, what: "the API server rejected it", err: err}
	case apierrors.IsForbidden(err):
		return &refusalError{reason: ReasonConfigMapForbidden, what: "the controller may not write it", err: err}
	}
	return nil
}

// condition is the Ready condition of a Book whose ConfigMap write was
// refused; its message carries the server's, so `kubectl get book` names
// the policy or the quota.
func (r *refusalError) condition(book *webappv2.Book) metav1.Condition {
	msg := r.err.Error()
	if len(msg) > maxRefusalMessage {
		n := maxRefusalMessage
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n] + "…"
	}
	return metav1.Condition{
		Type:   ConditionReady,
		Status: metav1.ConditionFalse,
		Reason: r.reason,
		Message: fmt.Sprintf("ConfigMap %s could not be written, %s; the controller retries: %s",
			book.Name, r.what, msg),
		ObservedGeneration: book.Generation,
	}
}

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

package framework

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// The audit log (pkg/localcluster Options.AuditLog) is the API server's
// record of who wrote what and when: the tests prove leader election from
// it, not from the controller's own log lines.

// ReadAuditLog reads the answered requests the API server has written to
// its audit log so far: one event each, at its ResponseComplete stage (or
// Panic), which carries both the time the request was received and the
// time it was answered. Env.AuditLog waits until the log is complete up to
// its call; use it rather than this.
func ReadAuditLog(path string) ([]auditv1.Event, error) {
	events, err := readAuditEvents(path)
	return completed(events), err
}

// completed keeps the events that record an answer.
func completed(events []auditv1.Event) []auditv1.Event {
	var out []auditv1.Event
	for _, ev := range events {
		if isAnswer(ev.Stage) {
			out = append(out, ev)
		}
	}
	return out
}

// isAnswer: the stage records the end of a request.
func isAnswer(s auditv1.Stage) bool {
	return s == auditv1.StageResponseComplete || s == auditv1.StagePanic
}

// readAuditEvents reads every event of the audit log, of every stage.
func readAuditEvents(path string) ([]auditv1.Event, error) {
	if path == "" {
		return nil, fmt.Errorf("the cluster has no audit log: start it with localcluster.Options.AuditLog")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e auditv1.Event
		if err := json.Unmarshal(line, &e); err != nil {
			// The API server writes whole lines; only the last one can be
			// caught half-written, and then it is not ours yet.
			break
		}
		events = append(events, e)
	}
	return events, sc.Err()
}

// Identity is the replica identity a user agent carries, as the manager
// sends it: "book-controller/VERSION (IDENTITY)". It is "" for other
// clients.
func Identity(userAgent string) string {
	if !strings.HasPrefix(userAgent, "book-controller") || !strings.HasSuffix(userAgent, ")") {
		return ""
	}
	i := strings.LastIndex(userAgent, " (")
	if i < 0 {
		return ""
	}
	return userAgent[i+2 : len(userAgent)-1]
}

// AuditWrite is a write of a Book, a Book's status, a ConfigMap or an Event
// that reached the API server, whatever its answer.
type AuditWrite struct {
	Writer   string    // replica identity, from the user agent
	At       time.Time // when the API server received it
	Verb     string
	Resource string // e.g. "books/status", "configmaps"
	Object   string // namespace/name
	Code     int32
}

func (w AuditWrite) String() string {
	return fmt.Sprintf("%s %s %s %s (%d) at %s", w.Writer, w.Verb, w.Resource, w.Object, w.Code, w.At.Format("15:04:05.000000"))
}

// LeaseWrite is a successful write of a Lease.
type LeaseWrite struct {
	Writer string    // replica identity from the user agent; "" for other clients
	At     time.Time // when the API server received it
	Done   time.Time // when it answered
	// What the write stored (from the response; from the request if the
	// audit log has no response): the holder ("" after a release), the
	// writer's clock when it made the attempt, the lease duration in
	// seconds, and the Lease's resourceVersion.
	Holder    string
	RenewTime time.Time
	Duration  int32
	Version   string
	// view is the Lease as a standby's elector compares it: client-go's
	// record with its times in whole seconds.
	view string
}

func (w LeaseWrite) String() string {
	return fmt.Sprintf("%s..%s by %q: holder %q, renewTime %s, %ds, version %s", w.At.Format("15:04:05.000000"),
		w.Done.Format("15:04:05.000000"), w.Writer, w.Holder, w.RenewTime.Format("15:04:05.000000"), w.Duration, w.Version)
}

// ControllerWrites returns the writes to Books, ConfigMaps and Events in
// namespace (all namespaces if "") made by controller replicas.
func ControllerWrites(events []auditv1.Event, namespace string) []AuditWrite {
	var out []AuditWrite
	for _, e := range events {
		id := Identity(e.UserAgent)
		ref := e.ObjectRef
		if id == "" || ref == nil || !isWriteVerb(e.Verb) || (namespace != "" && ref.Namespace != namespace) {
			continue
		}
		resource := ref.Resource
		if ref.Subresource != "" {
			resource += "/" + ref.Subresource
		}
		switch resource {
		case "books", "books/status", "configmaps", "events":
		default:
			continue
		}
		w := AuditWrite{Writer: id, At: e.RequestReceivedTimestamp.Time, Verb: e.Verb, Resource: resource,
			Object: ref.Namespace + "/" + ref.Name}
		if e.ResponseStatus != nil {
			w.Code = e.ResponseStatus.Code
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// LeaseWrites returns the successful writes of the Lease namespace/name,
// by anyone (dry runs left out), in the order received.
func LeaseWrites(events []auditv1.Event, namespace, name string) ([]LeaseWrite, error) {
	var out []LeaseWrite
	for _, e := range events {
		ref := e.ObjectRef
		if ref == nil || ref.Resource != "leases" || ref.Namespace != namespace || ref.Name != name ||
			!isWriteVerb(e.Verb) || strings.Contains(e.RequestURI, "dryRun=") ||
			e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
			continue
		}
		body := e.ResponseObject
		if body == nil {
			body = e.RequestObject
		}
		if body == nil {
			return nil, fmt.Errorf("the audit log records the Lease write at %s without its body: is the Lease rule at Request level or above?",
				e.RequestReceivedTimestamp.Format(time.RFC3339Nano))
		}
		var lease coordinationv1.Lease
		if err := json.Unmarshal(body.Raw, &lease); err != nil {
			return nil, fmt.Errorf("decoding a Lease write: %w", err)
		}
		spec := lease.Spec
		w := LeaseWrite{Writer: Identity(e.UserAgent), At: e.RequestReceivedTimestamp.Time, Done: e.StageTimestamp.Time,
			Version: lease.ResourceVersion}
		if spec.HolderIdentity != nil {
			w.Holder = *spec.HolderIdentity
		}
		if spec.RenewTime != nil {
			w.RenewTime = spec.RenewTime.Time
		}
		if spec.LeaseDurationSeconds != nil {
			w.Duration = *spec.LeaseDurationSeconds
		}
		var acquired time.Time
		if spec.AcquireTime != nil {
			acquired = spec.AcquireTime.Time
		}
		var transitions int32
		if spec.LeaseTransitions != nil {
			transitions = *spec.LeaseTransitions
		}
		w.view = fmt.Sprintf("%q %d %d %d %d", w.Holder, w.Duration, acquired.Unix(), w.RenewTime.Unix(), transitions)
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// Leadership is a period during which one replica may write, from the API
// server's view: from its acquisition of the Lease until its last renewal
// plus the renew deadline, or until it released the Lease. Only renewals a
// standby can tell from the Lease before them count (client-go compares
// Leases with times in whole seconds). That is the
// moment the issue calls "lost the Lease"; a standby may take over only a
// lease duration after the last renewal, later still.
type Leadership struct {
	Holder    string
	From      time.Time // its acquisition, received
	LastRenew time.Time // its last renewal, received
	Until     time.Time // LastRenew + renew deadline, or the release
	Released  bool
	// Held: the period had not ended when the audit log was read.
	Held bool
	// MovedAt is when the Lease was written to name another holder while
	// this period ran: by the holder's successor only after the period
	// ended, unless someone took the Lease by force (as a test does).
	MovedAt  time.Time
	Renewals int
	Writes   int       // writes inside this period
	LastAt   time.Time // the last of them
}

func (l Leadership) String() string {
	end := "renew deadline"
	if l.Released {
		end = "released"
	}
	return fmt.Sprintf("%s from %s until %s (%s; %d renewals, %d writes)", l.Holder, l.From.Format("15:04:05.000"),
		l.Until.Format("15:04:05.000"), end, l.Renewals, l.Writes)
}

// LeadershipReport is what the audit log says about leader election on one
// Lease and the writes of the replicas competing for it.
type LeadershipReport struct {
	Periods []Leadership
	Leases  []LeaseWrite
	Writes  []AuditWrite
	// Outside are the writes received when their writer held no
	// leadership: before it acquired the Lease, or after it lost it (its
	// last renewal plus the renew deadline) or released it. Must be empty.
	Outside []AuditWrite
	// Stale are writes inside their writer's period but received after the
	// Lease was written to name someone else: a leader still writing
	// before it noticed that the Lease was taken from it by force. Empty
	// unless a test takes the Lease by force.
	Stale []AuditWrite
	// Overlaps describe periods of different replicas that overlap in
	// time. A successor acquires only after its predecessor's period ends,
	// so this is empty unless the Lease was taken by force.
	Overlaps []string
	// MinSlack is, over the periods that ended at their renew deadline (a
	// loss), the smallest time between the period's last write and its end.
	// Negative when there was no such period.
	MinSlack time.Duration
}

// Leaderships derives the leadership periods on the Lease namespace/name
// from the audit log and checks every controller write in writesNamespace
// against them.
func Leaderships(events []auditv1.Event, leaseNamespace, leaseName, writesNamespace string, renewDeadline time.Duration) (*LeadershipReport, error) {
	return LeadershipsOver(events, leaseNamespace, leaseName, ControllerWrites(events, writesNamespace), renewDeadline)
}

// LeadershipsOver is Leaderships checking the writes given: with shards,
// those to the namespaces of one shard.
func LeadershipsOver(events []auditv1.Event, leaseNamespace, leaseName string, writes []AuditWrite, renewDeadline time.Duration) (*LeadershipReport, error) {
	leases, err := LeaseWrites(events, leaseNamespace, leaseName)
	if err != nil {
		return nil, err
	}
	r := &LeadershipReport{Leases: leases, Writes: writes, MinSlack: -1}
	open := map[string]*Leadership{} // the latest period of each holder
	end := func(p *Leadership) {
		r.Periods = append(r.Periods, *p)
		delete(open, p.Holder)
	}
	var stored string // the Lease as standbys last could see it
	for _, lw := range leases {
		// A standby restarts its countdown only when the Lease looks
		// different to it (times in whole seconds): a renewal that does
		// not extends nothing.
		visible := lw.view != stored
		stored = lw.view
		for _, p := range open {
			if p.Holder != lw.Holder && p.MovedAt.IsZero() && !lw.At.After(p.Until) {
				p.MovedAt = lw.At
			}
		}
		p := open[lw.Writer]
		switch {
		case lw.Writer != "" && lw.Holder == "" && p != nil && !lw.At.After(p.Until): // a release
			p.Until, p.Released = lw.At, true
			end(p)
		case lw.Writer == "" || lw.Holder != lw.Writer:
			// Written by someone other than the holder it names.
		case p != nil && p.MovedAt.IsZero() && !lw.At.After(p.Until): // a renewal in time
			if visible {
				p.LastRenew, p.Until = lw.At, lw.At.Add(renewDeadline)
			}
			p.Renewals++
		default: // an acquisition
			if p != nil {
				end(p)
			}
			open[lw.Writer] = &Leadership{Holder: lw.Writer, From: lw.At, LastRenew: lw.At, Until: lw.At.Add(renewDeadline)}
		}
	}
	var last time.Time
	if len(events) > 0 {
		last = events[len(events)-1].StageTimestamp.Time
	}
	for _, p := range open {
		p.Held = p.Until.After(last)
		end(p)
	}
	sort.Slice(r.Periods, func(i, j int) bool { return r.Periods[i].From.Before(r.Periods[j].From) })
	for _, w := range r.Writes {
		var in *Leadership
		for i := range r.Periods {
			p := &r.Periods[i]
			if p.Holder == w.Writer && !w.At.Before(p.From) && !w.At.After(p.Until) {
				in = p
			}
		}
		if in == nil {
			r.Outside = append(r.Outside, w)
			continue
		}
		in.Writes++
		in.LastAt = w.At
		if !in.MovedAt.IsZero() && w.At.After(in.MovedAt) {
			r.Stale = append(r.Stale, w)
		}
	}
	for i, p := range r.Periods {
		if !p.Released && !p.Held && p.Writes > 0 {
			if slack := p.Until.Sub(p.LastAt); r.MinSlack < 0 || slack < r.MinSlack {
				r.MinSlack = slack
			}
		}
		for _, q := range r.Periods[:i] {
			if q.Holder != p.Holder && p.From.Before(q.Until) {
				r.Overlaps = append(r.Overlaps, fmt.Sprintf("%s overlaps %s", p, q))
			}
		}
	}
	return r, nil
}

func isWriteVerb(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

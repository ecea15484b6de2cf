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
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const etcdName = "localcluster"

func (c *Cluster) etcdURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d", c.st.EtcdClientPort)
}

func (c *Cluster) etcdArgs() []string {
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.st.EtcdPeerPort)
	return append([]string{
		"--name=" + etcdName,
		"--data-dir=" + filepath.Join(c.dir, "etcd"),
		"--listen-client-urls=" + c.etcdURL(),
		"--advertise-client-urls=" + c.etcdURL(),
		// The peer port is never used by a one-member cluster, but etcd
		// binds it anyway, and its default (2380) would clash between two
		// clusters on one machine.
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + etcdName + "=" + peer,
		// Losing the page cache means losing the machine, and with it any
		// reason to keep this throwaway data; fsync only slows tests.
		"--unsafe-no-fsync",
		// etcd's default quota (2 GiB) counts the database file, which
		// keeps every revision until the API server compacts (every 5
		// min) and never shrinks: benchmarks at 50000 Books, a few
		// hundred MB of revisions per phase, fill it within a run and
		// etcd then refuses every write ("mvcc: database space
		// exceeded"). The data is throwaway; the disk is the limit.
		"--quota-backend-bytes=" + strconv.FormatInt(8<<30, 10),
		"--log-level=warn",
	}, c.st.EtcdArgs...)
}

// EtcdURL is etcd's client URL, for tests that talk to etcd itself (to
// compact, defragment or disarm an alarm).
func (c *Cluster) EtcdURL() string { return c.etcdURL() }

func (c *Cluster) startEtcd(ctx context.Context) error {
	return c.startComponent(ctx, Etcd, c.etcdArgs(), 30*time.Second, func(ctx context.Context) error {
		// /health answers 200 with {"health":"false"} while there is no
		// leader, so the body must be checked too.
		return getHealth(ctx, c.etcdURL()+"/health")
	})
}

func getHealth(ctx context.Context, url string) error {
	body, err := get(ctx, url, "")
	if err != nil {
		return err
	}
	if !strings.Contains(body, `"health":"true"`) {
		return fmt.Errorf("%s: %s", url, strings.TrimSpace(body))
	}
	return nil
}

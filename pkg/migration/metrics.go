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

package migration

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Migrator's Prometheus metrics.
type Metrics struct {
	migrations *prometheus.CounterVec
	running    prometheus.Gauge
	stored     prometheus.Gauge
}

// NewMetrics registers the Migrator's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		migrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "book_controller_storage_migrations_total",
			Help: "StorageVersionMigrations of the CRD this process created (result started) and saw end (succeeded, failed).",
		}, []string{"result"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "book_controller_storage_migration_running",
			Help: "1 while a StorageVersionMigration of the CRD created by this process has neither succeeded nor failed.",
		}),
		stored: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "book_controller_crd_stored_versions",
			Help: "Number of versions in the CRD's status.storedVersions: 1 once every object is stored in the storage version.",
		}),
	}
	reg.MustRegister(m.migrations, m.running, m.stored)
	return m
}

func (m *Metrics) count(result string) {
	if m != nil {
		m.migrations.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) observe(stored int, running bool) {
	if m == nil {
		return
	}
	m.stored.Set(float64(stored))
	if running {
		m.running.Set(1)
	} else {
		m.running.Set(0)
	}
}

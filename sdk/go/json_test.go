package platinum_test

import (
	"encoding/json"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestMarshalKeepsAPIShape checks that re-encoding a decoded record gives
// back the API's JSON: same keys, six fractional digits on times.
func TestMarshalKeepsAPIShape(t *testing.T) {
	tests := []struct {
		name string
		wire string
		into func() any
	}{
		{"sandbox", `{"id":"sbx_1","name":"n","state":"running","template":"busybox","template_version_id":"tplv_1","cpu":0.5,"ram_mb":512,"disk_gb":2,"env_keys":["A"],"metadata":{"k":"v"},"host_id":"host_1","created_at":"2026-11-29T15:04:05.120000Z","updated_at":"2026-11-29T15:04:06.000001Z","type":"persistent","auto_stop_minutes":60,"auto_archive_days":7,"auto_delete_days":0,"auto_resume":true}`,
			func() any { return new(platinum.Sandbox) }},
		{"started sandbox", `{"id":"sbx_1","state":"running","template":"busybox","cpu":1,"ram_mb":512,"disk_gb":2,"env_keys":[],"metadata":{"last_start":"{\"restore\":\"disk_only\",\"ram_restored\":false,\"at\":\"2026-11-29T15:04:06.5Z\"}"},"created_at":"2026-11-29T15:04:05.000000Z","updated_at":"2026-11-29T15:04:06.000000Z","type":"dev","auto_stop_minutes":120,"auto_archive_days":30,"auto_delete_days":0,"expires_at":"2026-12-01T00:00:00.000000Z","restore":"disk_only","ram_restored":false,"auto_resume":false,"parent_id":"sbx_0"}`,
			func() any { return new(platinum.Sandbox) }},
		{"deleted sandbox", `{"id":"sbx_1","state":"deleted","template":"busybox","cpu":1,"ram_mb":512,"disk_gb":2,"env_keys":[],"metadata":{},"reason":"user_deleted","created_at":"2026-11-29T15:04:05.000000Z","updated_at":"2026-11-29T15:04:05.000000Z","deleted_at":"2026-11-29T15:04:07.100000Z","deleted_reason":"user_deleted","type":"ephemeral","auto_stop_minutes":15,"auto_archive_days":0,"auto_delete_days":0,"auto_resume":true}`,
			func() any { return new(platinum.Sandbox) }},
		{"template", `{"slug":"busybox","version_id":"tplv_1","status":"ready","default":false,"size_bytes":5,"created_at":"2026-11-29T15:04:05.100000Z"}`,
			func() any { return new(platinum.Template) }},
		{"unbuilt template", `{"slug":"python","status":"not_built","size_bytes":0,"default":false}`,
			func() any { return new(platinum.Template) }},
		{"file entry", `{"name":"a","path":"/a","type":"file","size":1,"mode":"-rw-r--r--","modified_at":"2026-11-29T15:04:05.000000Z"}`,
			func() any { return new(platinum.FileEntry) }},
		{"org", `{"id":"org_1","name":"acme","created_at":"2026-11-29T15:04:05.000010Z"}`,
			func() any { return new(platinum.Org) }},
		{"metrics", `{"cpu_percent":12.5,"memory_used_bytes":1,"memory_limit_bytes":2,"disk_used_bytes":3,"disk_size_bytes":4,"net_rx_bytes":5,"net_tx_bytes":6,"pids":7,"at":"2026-11-29T15:04:05.000010Z"}`,
			func() any { return new(platinum.Metrics) }},
		{"usage", `{"id":"sbx_1","from":"2026-11-29T15:04:05.000000Z","to":"2026-11-29T16:04:05.000000Z","cpu_seconds":7200,"ram_gb_seconds":1800,"storage_gb_hours":0.5,"periods":[{"state":"running","from":"2026-11-29T15:04:05.000000Z","to":"2026-11-29T16:04:05.000000Z","cpu":2,"ram_mb":512,"disk_gb":2}]}`,
			func() any { return new(platinum.Usage) }},
		{"resize", `{"id":"sbx_1","state":"running","cpu":4,"ram_mb":8192,"disk_gb":20,"applies_at":"now","requested":{"cpu":4,"ram_mb":8192},"partial":false,"live":{"max_cpu":16,"max_ram_mb":16384,"guest_cpus_online":4,"guest_mem_total_mb":7962}}`,
			func() any { return new(platinum.ResizeResult) }},
		{"env result", `{"id":"sbx_1","state":"running","env_keys":["A"],"applies":"next_exec"}`,
			func() any { return new(platinum.EnvResult) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.into()
			if err := json.Unmarshal([]byte(tt.wire), v); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			json.Unmarshal([]byte(tt.wire), &a)
			json.Unmarshal(got, &b)
			ga, _ := json.Marshal(a)
			gb, _ := json.Marshal(b)
			if string(ga) != string(gb) {
				t.Errorf("re-encoded\n got %s\nwant %s", gb, ga)
			}
		})
	}
	if s := (platinum.Sandbox{CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))}); true {
		b, _ := json.Marshal(s)
		var m map[string]any
		json.Unmarshal(b, &m)
		if m["created_at"] != "2026-01-02T02:04:05.000000Z" {
			t.Errorf("created_at = %v, want UTC with six digits", m["created_at"])
		}
	}
}

package runner

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseMetrics(t *testing.T) {
	const text = `# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 12
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 1500
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PATCH"} 3
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 7.0
workqueue_depth{controller="workload",name="workload"} 4
process_cpu_seconds_total 1.5e+01
`
	tests := []struct {
		name  string
		names []string
		want  map[string]int // method → sum, for rest_client_requests_total
		count int
	}{
		{"requests by method", []string{"rest_client_requests_total"}, map[string]int{"GET": 12, "PATCH": 1503, "POST": 7}, 4},
		{"unlabelled metric", []string{"process_cpu_seconds_total"}, map[string]int{}, 1},
		{"nothing asked", nil, map[string]int{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			samples, err := parseMetrics(strings.NewReader(text), tc.names...)
			if err != nil {
				t.Fatal(err)
			}
			if len(samples) != tc.count {
				t.Errorf("got %d samples, want %d", len(samples), tc.count)
			}
			if got := requestsByMethod(samples); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sum by method = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := parseMetrics(strings.NewReader("rest_client_requests_total{method=\"GET\"} x\n"), "rest_client_requests_total"); err == nil {
		t.Error("a malformed value parsed")
	}
}

func TestDiff(t *testing.T) {
	got := diff(map[string]int{"GET": 5, "PATCH": 9, "POST": 1}, map[string]int{"GET": 5, "PATCH": 4})
	if want := map[string]int{"PATCH": 5, "POST": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("diff = %v, want %v", got, want)
	}
}

func TestReadAudit(t *testing.T) {
	at := func(s string) string { return `"requestReceivedTimestamp":"2026-01-01T00:00:` + s + `Z"` }
	lines := []string{
		`{"verb":"patch","user":{"username":"berth-controller"},"objectRef":{"resource":"workloads","subresource":"status"},"responseStatus":{"code":200},` + at("01.000000") + `}`,
		`{"verb":"patch","user":{"username":"berth-controller"},"objectRef":{"resource":"workloads","subresource":"status"},"responseStatus":{"code":409},` + at("02.000000") + `}`,
		`{"verb":"create","user":{"username":"berth-controller"},"objectRef":{"resource":"events","apiGroup":"events.k8s.io"},"responseStatus":{"code":201},` + at("03.000000") + `}`,
		`{"verb":"create","user":{"username":"admin"},"objectRef":{"resource":"workloads"},"responseStatus":{"code":201},` + at("03.500000") + `}`,
		`{"verb":"list","user":{"username":"berth-controller"},"objectRef":{"resource":"workloads"},"responseStatus":{"code":200},` + at("00.500000") + `}`,
		`{"verb":"get","user":{"username":"berth-controller"},"objectRef":{"resource":"workloads"},"responseStatus":{"code":500},` + at("09.000000") + `}`,
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	tests := []struct {
		name string
		to   time.Time
		want AuditCounts
	}{
		{"run window", from.Add(5 * time.Second), AuditCounts{
			ByRequest: map[string]int{"patch workloads/status": 2, "create events": 1}, Conflicts: 1}},
		{"whole log after from", from.Add(time.Minute), AuditCounts{
			ByRequest: map[string]int{"patch workloads/status": 2, "create events": 1, "get workloads": 1}, Conflicts: 1, Errors: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAudit(path, berthUser, from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("readAudit = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	tests := []struct {
		m    map[string]int
		per  int
		want string
	}{
		{map[string]int{"PATCH": 30, "POST": 10, "GET": 10}, 20, " PATCH 30 (1.500/wl), GET 10 (0.500/wl), POST 10 (0.500/wl)"},
		{map[string]int{"POST": 3}, 0, " POST 3"},
		{nil, 5, ""},
	}
	for _, tc := range tests {
		if got := counts(tc.m, tc.per); got != tc.want {
			t.Errorf("counts(%v, %d) = %q, want %q", tc.m, tc.per, got, tc.want)
		}
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckedInDashboardIsCurrent: config/dashboards/berth.json is what
// this program builds (`make generate` writes it).
func TestCheckedInDashboardIsCurrent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "berth.json")
	if err := write(out); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "dashboards", "berth.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("config/dashboards/berth.json is stale: run make generate")
	}
}

// TestEveryPanelQueriesBerth: each panel has a title, a description and
// queries of berth's series, on the dashboard's data source, with a
// unique id.
func TestEveryPanelQueriesBerth(t *testing.T) {
	d, err := build()
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Panels []struct {
			ID          int    `json:"id"`
			Type        string `json:"type"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Targets     []struct {
				Expr       string `json:"expr"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &parsed); err != nil {
		t.Fatal(err)
	}
	ids := map[int]bool{}
	for _, p := range parsed.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Description == "" || len(p.Targets) == 0 {
			t.Errorf("panel %q: needs a title, a description and a query", p.Title)
		}
		for _, q := range p.Targets {
			if !strings.Contains(q.Expr, "berth_") || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: query %q must read berth's series from ${datasource}", p.Title, q.Expr)
			}
		}
	}
}

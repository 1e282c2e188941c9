package trace

import (
	"encoding/json"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "90s", want: 90 * time.Second},
		{in: "2h", want: 2 * time.Hour},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "90", want: 90 * time.Second},
		{in: "1.5", want: 1500 * time.Millisecond},
		{in: " 0 ", want: 0},
		{in: "", want: 0},
		{in: "-5s", want: -5 * time.Second},
		{in: "90 minutes", wantErr: `invalid duration "90 minutes"`},
		{in: "5x", wantErr: "a number of seconds"},
		{in: "1e300", wantErr: "within ±292 years"},
		{in: "NaN", wantErr: "finite number"},
		{in: "inf", wantErr: "finite number"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseDuration(tt.in)
			if tt.wantErr != "" {
				wantErr(t, err, tt.wantErr)
				return
			}
			wantErr(t, err)
			if got != tt.want {
				t.Errorf("parseDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    time.Duration
		wantErr string
	}{
		{name: "go duration", in: `"90s"`, want: 90 * time.Second},
		{name: "seconds number", in: `90`, want: 90 * time.Second},
		{name: "fractional seconds", in: `0.25`, want: 250 * time.Millisecond},
		{name: "seconds string", in: `"120"`, want: 2 * time.Minute},
		{name: "null keeps the value", in: `null`, want: time.Minute},
		{name: "bad unit", in: `"3 days"`, wantErr: `invalid duration "3 days"`},
		{name: "not a duration", in: `true`, wantErr: "invalid duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Duration{time.Minute}
			err := json.Unmarshal([]byte(tt.in), &d)
			if tt.wantErr != "" {
				wantErr(t, err, tt.wantErr)
				return
			}
			wantErr(t, err)
			if d.Duration != tt.want {
				t.Errorf("got %v, want %v", d.Duration, tt.want)
			}
		})
	}
}

func TestDurationMarshalsAsString(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{in: 90 * time.Second, want: `"1m30s"`},
		{in: 0, want: `"0s"`},
		{in: 1500 * time.Millisecond, want: `"1.5s"`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(Duration{tt.in})
		wantErr(t, err)
		if string(got) != tt.want {
			t.Errorf("Marshal(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

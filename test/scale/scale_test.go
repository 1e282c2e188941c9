package scale

import "testing"

func TestLong(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{value: "", want: false},
		{value: "0", want: false},
		{value: "false", want: false},
		{value: "1", want: true},
		{value: "true", want: true},
		{value: "yes please", want: true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv(Env, tc.value)
			if got := Long(); got != tc.want {
				t.Errorf("Long() with %s=%q = %v, want %v", Env, tc.value, got, tc.want)
			}
			if got, want := Pick(1, 2), map[bool]int{false: 1, true: 2}[tc.want]; got != want {
				t.Errorf("Pick(1, 2) = %d, want %d", got, want)
			}
		})
	}
}

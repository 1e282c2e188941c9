package runner

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Sample is one sample of a Prometheus text exposition.
type Sample struct {
	// Name of the metric.
	Name string
	// Labels of the sample.
	Labels map[string]string
	// Value of the sample.
	Value float64
}

// scrape reads the metrics at url and returns the samples of the named
// metrics.
func scrape(ctx context.Context, url string, names ...string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body, names...)
}

// parseMetrics parses the Prometheus text format, keeping the samples of
// the named metrics. It handles what controller-runtime's registry writes:
// one sample per line, label values without escaped quotes or commas.
func parseMetrics(r io.Reader, names ...string) ([]Sample, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if !want[name] {
			continue
		}
		s := Sample{Name: name, Labels: map[string]string{}}
		if strings.HasPrefix(rest, "{") {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("malformed metric line %q", line)
			}
			for _, pair := range strings.Split(rest[1:end], ",") {
				k, v, ok := strings.Cut(pair, "=")
				if ok {
					s.Labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
				}
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("malformed metric line %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("malformed value in %q: %w", line, err)
		}
		s.Value = v
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

// requestsByMethod adds up the samples of client-go's request counter by
// HTTP method.
func requestsByMethod(samples []Sample) map[string]int {
	out := map[string]int{}
	for _, s := range samples {
		if s.Name == requestsMetric {
			out[s.Labels["method"]] += int(s.Value)
		}
	}
	return out
}

// diff returns after - before, key by key, dropping zeros.
func diff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

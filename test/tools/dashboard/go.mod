module github.com/berth-dev/berth/test/tools/dashboard

go 1.26.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22

module github.com/berth-dev/berth/test/tools/blockkit

go 1.26.0

require golang.org/x/image v0.48.0

require (
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)

module github.com/riffle-go/riffle/interop

go 1.26.0

replace github.com/riffle-go/riffle => ../

require (
	github.com/riffle-go/riffle v0.0.0-00010101000000-000000000000
	github.com/twmb/franz-go v1.22.3
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
)

// Builds hack/s3server, the S3 server of the snapshot store's tests, from
// the Go module proxy.
module playground.dev/hack/s3server

go 1.26.0

require (
	github.com/johannesboyne/gofakes3 v1.2.0
	go.etcd.io/bbolt v1.4.3
)

require (
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	go.shabbyrobe.org/gocovmerge v0.0.0-20230507111327-fa4f82cfbf4d // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/tools v0.8.0 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
	gopkg.in/mgo.v2 v2.0.0-20180705113604-9856a29383ce // indirect
)

// Tools module: the local node's helpers (hack/build-tools.sh, make
// cluster-up NODE=1): the image registry on localhost:5000, the proxy that
// lets pods reach the API server at the kubernetes Service's address, and
// the pod sandbox's pause binary. Never imported by the product, so
// go-containerregistry stays out of the product's go.mod; its version is the
// image builder's (hack/tools/image), so the two share compiled packages.
module ydzs.io/book-controller/hack/tools/node

go 1.26.0

godebug default=go1.26

require (
	github.com/google/go-containerregistry v0.22.1
	golang.org/x/sys v0.47.0
)

require (
	github.com/docker/cli v29.7.2+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.3 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	golang.org/x/sync v0.22.0 // indirect
	gotest.tools/v3 v3.5.2 // indirect
)

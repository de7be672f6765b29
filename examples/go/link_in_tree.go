//go:build gannet_no_pkgconfig

package gannet

// Linking without pkg-config (the tag gannet_no_pkgconfig, which the repository's CMake build
// sets): -lgannet, with the folder of libgannet.so given by the caller, e.g.
//   CGO_LDFLAGS="-L$LIBDIR -Wl,-rpath,$LIBDIR" go build -tags gannet_no_pkgconfig ./...
// The header comes from the repository (the CFLAGS in gannet.go). See link_pkgconfig.go.

// #cgo LDFLAGS: -lgannet
import "C"

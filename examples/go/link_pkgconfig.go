//go:build !gannet_no_pkgconfig

package gannet

// Linking, outside gannet's own build: pkg-config finds an installed gannet (gannet.pc gives
// -I<prefix>/include and -L<prefix>/lib -Wl,-rpath,<prefix>/lib -lgannet, so the program finds
// libgannet.so at run time without LD_LIBRARY_PATH); set PKG_CONFIG_PATH to
// <prefix>/lib/pkgconfig for a prefix pkg-config does not search. tests/install/install_test.sh
// builds and runs ./cmd/generate this way.
//
// Inside the repository's CMake build (examples/go/CMakeLists.txt) the tag gannet_no_pkgconfig
// selects link_in_tree.go instead: that build links the libgannet.so it just built, through
// CGO_LDFLAGS, must not pick up an installed gannet of another version, and must work where
// pkg-config is absent. The header is found either way (see the CFLAGS in gannet.go).

// #cgo pkg-config: gannet
import "C"

#!/usr/bin/env bash
# Installs the CUDA 12.4 toolkit that builds gannet for Volta (sm_70) into .cuda12/ in the
# repository root, without touching the system: CUDA 13 (the default toolkit) cannot target sm_70.
#
# Where it comes from: Debian's own packaging of the toolkit (non-free, trixie: nvcc, cicc,
# ptxas, fatbinary, nvlink, the headers, cudart and cuBLAS/cuBLASLt 12.4). PyPI's
# nvidia-cuda-nvcc-cu12 wheels carry only ptxas and libnvvm (no nvcc driver, cicc front end,
# fatbinary or nvlink; checked for 12.0 through 12.9), so they cannot compile CUDA C++. Trixie's
# binaries need glibc >= 2.34 (bookworm has 2.36) and accept g++ 12.
#
# The packages are fetched with a private apt configuration (no change to /etc/apt) and unpacked
# with dpkg -x into .cuda12/root; .cuda12/toolkit lays them out as a standard toolkit (the
# package's nvcc.profile points into /usr and /etc, so nvcc gets a profile of its own). About 1.2 GB downloaded, 3.2 GB
# unpacked; nothing is done when .cuda12/root/.complete exists.
set -euo pipefail
root_dir=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
dest="$root_dir/.cuda12"
[ -f "$dest/root/.complete" ] && { echo "CUDA 12.4 for sm_70: $dest/toolkit (already installed)"; exit 0; }
mkdir -p "$dest/apt/lists/partial" "$dest/debs" "$dest/root"
cat > "$dest/apt/sources.list" <<'LIST'
deb http://deb.debian.org/debian trixie non-free
LIST
apt_opts=(-o "Dir::Etc::SourceList=$dest/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$dest/apt/lists" -o "Dir::Cache::archives=$dest/debs"
          -o APT::Get::List-Cleanup=0)
echo "fetching the Debian (trixie, non-free) CUDA 12.4 packages into $dest/debs"
apt-get "${apt_opts[@]}" update -qq
(cd "$dest/debs" && apt-get "${apt_opts[@]}" download -q \
  nvidia-cuda-toolkit=12.4.131~12.4.1-2 nvidia-cuda-dev=12.4.127~12.4.1-2 \
  libcudart12=12.4.127~12.4.1-2 libcublas12=12.4.5.8~12.4.1-2 \
  libcublaslt12=12.4.5.8~12.4.1-2 libnvvm4=12.4.131~12.4.1-2)
for d in "$dest"/debs/*.deb; do dpkg -x "$d" "$dest/root"; done
# The standard toolkit layout CMake and nvcc expect, over the unpacked Debian tree: bin/ (a copy
# of nvcc, whose profile is found next to it, and links to the other tools), nvvm/bin/cicc,
# nvvm/libdevice, include/, lib64/.
tk="$dest/toolkit"
deb_bin="$dest/root/usr/lib/nvidia-cuda-toolkit/bin"
rm -rf "$tk"
mkdir -p "$tk/bin" "$tk/nvvm/bin"
for t in "$dest"/root/usr/bin/*; do
  [ "$(basename "$t")" = nvcc ] || ln -s "$t" "$tk/bin/$(basename "$t")"
done
cp "$deb_bin/nvcc" "$tk/bin/nvcc"
ln -s "$deb_bin/crt" "$tk/bin/crt"
ln -s "$deb_bin/cicc" "$tk/nvvm/bin/cicc"
ln -s "$dest/root/usr/lib/nvidia-cuda-toolkit/libdevice" "$tk/nvvm/libdevice"
ln -s "$dest/root/usr/include" "$tk/include"
ln -s "$dest/root/usr/lib/x86_64-linux-gnu" "$tk/lib64"
cat > "$tk/bin/nvcc.profile" <<'PROFILE'
TOP		= $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH	+= $(TOP)/lib64:
PATH		+= $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES	+= "-I$(TOP)/include" $(_SPACE_)
LIBRARIES	=+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
PROFILE
"$tk/bin/nvcc" --version | tail -2
touch "$dest/root/.complete"
echo "CUDA 12.4 for sm_70: $dest/toolkit"

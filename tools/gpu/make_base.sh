#!/bin/bash
# The baseline of an A/B run on the GPU machine (whose copy of the tree has no .git): the source
# of COMMIT as .base/src.tar.gz, with this tree's bench/kernels overlaid so both builds run the
# same benchmark rows. Carry ".base" to the GPU machine.
#   tools/gpu/make_base.sh COMMIT
set -euo pipefail
commit=$(git rev-parse --short "$1")
rm -rf .base && mkdir -p .base/tree
git archive "$commit" | tar -x -C .base/tree
cp bench/kernels/*.cc bench/kernels/*.h .base/tree/bench/kernels/
tar -czf .base/src.tar.gz -C .base/tree .
rm -rf .base/tree
echo "$commit (bench/kernels from the working tree)" > .base/commit
ls -la .base

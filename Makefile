# Thin wrappers over CMake presets. The README's quick start is `make demo` and `make test`.
#   make demo        install missing packages (as root), build the CLI for this machine only
#                    (tools/demo_build.sh: no GPU, no CUDA code; a GPU, its arch), run it on the
#                    trained tiny model
#   make test        build and run the test suite (ctest)
#   make sanitize    ASan+UBSan build of the engine/C-ABI tests and TSan on the concurrency tests
#   make fuzz        build the libFuzzer targets (clang, ASan+UBSan) and run each FUZZ_SECONDS
#                    (default 60) on a copy of its committed corpus; fails on any finding
#   make dev         configure + build the sm_90-only developer preset
#   make format      clang-format 14 over the tracked C/C++/CUDA sources (tools/format.sh)
#   make format-check  fail listing the files `make format` would change (CI)
#   make tsa         clang -Wthread-safety -Werror build of lib/ (CPU, the tsa preset; nothing runs)
#   make sm70        the Volta build: fetches Debian's CUDA 12.4 into .cuda12/ (CUDA 13 cannot
#                    target sm_70; tools/sm70/install_cuda12.sh) and builds everything for sm_70
# PRESET picks the CMake preset for build/test (default: release, the full CUDA arch list when
# nvcc is present; `make test PRESET=cpu` skips CUDA).

PRESET ?= release
JOBS ?= $(shell nproc)
BUILD := build/$(PRESET)
TINY := tests/data/tiny
# Evaluated only by the demo (it asks nvidia-smi).
DEMO_BUILD = $(shell tools/demo_build.sh --dir)
GANNET = $(DEMO_BUILD)/examples/cli/gannet
FUZZ_SECONDS ?= 60
FUZZ_SEED ?=

.PHONY: all deps configure build demo test sanitize fuzz dev sm70 format format-check tsa clean

all: build

deps:
	@tools/install_deps.sh

configure: deps
	@mkdir -p build && cmake --preset $(PRESET) > $(BUILD).configure.log 2>&1 || \
	  (cat $(BUILD).configure.log; exit 1)
	@grep -E "^-- gannet" $(BUILD).configure.log || true

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo:
	@tools/install_deps.sh --required
	@tools/demo_build.sh $(JOBS)
	@echo "== gannet info $(TINY)/trained   (a 3.6M-parameter Gemma-4 trained by tools/train_tiny on the KJV and WEB bibles)"
	@$(GANNET) info $(TINY)/trained
	@echo
	@echo "== gannet generate (sampled, fixed seed)"
	@$(GANNET) generate --backend cpu -m $(TINY)/trained -p "In the beginning God" -n 48 --temp 0.8 --top-p 0.95 --seed 7
	@echo
	@echo "== gannet generate --draft (greedy, speculative decoding with its trained MTP assistant)"
	@$(GANNET) generate --backend cpu -m $(TINY)/trained --draft $(TINY)/trained-assistant -p "And Jesus said unto them," -n 48
	@echo
	@echo "== gannet chat (two turns, streamed; earlier turns come from the prefix cache)"
	@printf 'The LORD is my shepherd.\nWho shall dwell in thy holy hill?\n' | $(GANNET) chat --backend cpu -m $(TINY)/trained -n 40 --temp 0.7 --seed 3

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

sanitize: deps
	@tools/run_sanitizers.sh

fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_SEED=$(FUZZ_SEED) tools/run_fuzzers.sh

dev:
	@cmake --preset dev && cmake --build build/dev -j $(JOBS)

format: deps
	@tools/format.sh

format-check: deps
	@tools/format.sh --check

# Nothing runs: the analysis is the compiler's (lib/common/mutex.h says what it checks). lib/ (in
# libgannet.so) and the tests of the annotated wrappers; the other tests hold no annotated state.
tsa: deps
	@command -v clang++ > /dev/null || { echo "make tsa needs clang: sudo apt-get install -y clang"; exit 1; }
	@mkdir -p build && cmake --preset tsa > build/tsa.configure.log 2>&1 || \
	  (cat build/tsa.configure.log; exit 1)
	@cmake --build build/tsa -j $(JOBS) --target gannet common_test

sm70: deps
	@tools/sm70/install_cuda12.sh
	@mkdir -p build && cmake --preset sm70 > build/sm70.configure.log 2>&1 || (cat build/sm70.configure.log; exit 1)
	@cmake --build build/sm70 -j $(JOBS)
	@tools/sm70/check_arch.sh build/sm70

clean:
	@rm -rf build

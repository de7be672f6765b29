# Thin wrappers over CMake presets. The README's quick start is `make demo` and `make test`.
#   make demo        install missing packages (as root), build, run the CLI on the tiny model
#   make test        build and run the test suite (ctest)
#   make sanitize    ASan+UBSan build of the engine/C-ABI tests and TSan on the concurrency tests
#   make fuzz        build the libFuzzer targets (clang, ASan+UBSan) and run each FUZZ_SECONDS
#                    (default 60) on a copy of its committed corpus; fails on any finding
#   make dev         configure + build the sm_90-only developer preset
# PRESET picks the CMake preset for demo/test (default: release, the full CUDA arch list when
# nvcc is present; `make test PRESET=cpu` skips CUDA).

PRESET ?= release
JOBS ?= $(shell nproc)
BUILD := build/$(PRESET)
TINY := tests/data/tiny
GANNET := $(BUILD)/examples/cli/gannet
FUZZ_SECONDS ?= 60
FUZZ_SEED ?=

.PHONY: all deps configure build demo test sanitize fuzz dev clean

all: build

deps:
	@tools/install_deps.sh

configure: deps
	@mkdir -p build && cmake --preset $(PRESET) > $(BUILD).configure.log 2>&1 || \
	  (cat $(BUILD).configure.log; exit 1)
	@grep -E "^-- gannet" $(BUILD).configure.log || true

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@echo "== gannet info $(TINY)/31b"
	@$(GANNET) info $(TINY)/31b
	@echo
	@echo "== gannet generate (tiny random-weight 31B-shaped model on the CPU: the text is noise)"
	@$(GANNET) generate --backend cpu -m $(TINY)/31b -p "The quick brown fox" -n 24 --ids
	@echo
	@echo "== gannet chat (two turns, streamed; earlier turns come from the prefix cache)"
	@printf 'Hello, who are you?\nTell me a story.\n' | $(GANNET) chat --backend cpu -m $(TINY)/e4b -n 24

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

sanitize: deps
	@tools/run_sanitizers.sh

fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_SEED=$(FUZZ_SEED) tools/run_fuzzers.sh

dev:
	@cmake --preset dev && cmake --build build/dev -j $(JOBS)

clean:
	@rm -rf build

# Build everything; `make test` is the one test command (CI calls it through .ci/run).
#
#   make               CPU trainer and tools, CUDA trainer (nvcc), tests
#   make test          install missing packages, build, generate references, run every test
#   make check         build what the tests need (no nvcc) and run the quick tier: the inner loop's few minutes
#   make cpu           only what the CPU needs (no nvcc)
#   make asan          the CPU programs and tests with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/,
#                      and a CI-sized run of them (test/e2e/asan_test.sh)
#   GPU_ARCH="90"      override the CUDA architectures (default: sm_80 and sm_90 in one fatbinary, plus PTX of the
#                      last one so newer GPUs can JIT-compile it)
#
# Object files go to build/; sources are found by wildcard, so a new llmc/*.cpp, llmc/cpu/*.cpp, llmc/cuda/*.cu,
# test/unit/test_*.cpp or test/sim/test_*.cpp is picked up without editing this file.

CXX      ?= g++
NVCC     ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
# ccache, when installed, in front of the default compilers (a CXX or NVCC given by the caller is used as given).
# Every binary is compiled to an object and then linked, since ccache does not cache a command that also links.
# CCACHE_NOHASHDIR: a fresh clone in another folder hits the same entries (-g's only use of the folder is the
# debug info's compilation directory, which then names the first clone's).
# CCACHE_DEPEND: on a miss ccache takes the key from the -MMD dependency file instead of running the preprocessor
# first, which cuts a miss's overhead from 5-20% of the compile to 1-3% (ccache's figures): a fresh machine's first
# build is all misses.
# Only with a cache folder it can write (a read-only home would fail every compile instead).
CCACHE   := $(shell d=$$(ccache -k cache_dir 2>/dev/null) && mkdir -p "$$d" 2>/dev/null && [ -w "$$d" ] && \
                    command -v ccache)
ifneq ($(CCACHE),)
ifeq ($(origin CXX),default)
CXX      := $(CCACHE) g++
endif
ifeq ($(origin NVCC),file)
NVCC     := $(CCACHE) $(NVCC)
endif
export CCACHE_NOHASHDIR := 1
export CCACHE_DEPEND := 1
endif
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(lastword $(NVCC)))
GPU_ARCH ?= 80 90
BUILD    ?= build
BIN_DIR  ?= .
SANITIZE ?=

# MPI's include paths as system headers, and without its deprecated C++ bindings (they do not build with -Werror).
MPI_CFLAGS := $(patsubst -I%,-isystem %,$(shell mpicxx --showme:compile 2>/dev/null)) -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX
MPI_LIBS   := $(shell mpicxx --showme:link 2>/dev/null)

WARN      := -Wall -Wextra -Werror -Wno-unused-parameter
# -g1: line tables only (backtraces, sanitizer reports and perf keep file:line). Full -g made the simulator's
# template-heavy objects take 1.7x as long to compile (test/README.md); `make CXXFLAGS="-O2 -g"` for a debugger.
CXXFLAGS  ?= -O2 -g1
CXXFLAGS  += -std=c++17 -fopenmp -I. $(WARN) $(MPI_CFLAGS) -MMD -MP $(SANITIZE)
CPU_LIBS  := -lopenblas -lpcre2-8 -fopenmp $(MPI_LIBS)

GENCODE   := $(foreach a,$(GPU_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
             -gencode arch=compute_$(lastword $(GPU_ARCH)),code=compute_$(lastword $(GPU_ARCH))
NVCCFLAGS ?= -O3
NVCCFLAGS += -std=c++17 $(GENCODE) -I. -Werror all-warnings -Xptxas -warn-spills,-warn-lmem-usage \
             -Xcompiler -fopenmp,-Wall,-Wextra,-Wno-unused-parameter $(MPI_CFLAGS) -MMD -MP
CUDA_LIBS := -lcublasLt -lnccl -lopenblas -lpcre2-8 -lgomp $(MPI_LIBS)

# The CUDA simulator compiles the real llmc/cuda sources with g++ against dev/cudasim/include.
SIMFLAGS  := -DLLMC_CUDASIM -Idev/cudasim/include -isystem $(CUDA_HOME)/include

CORE_SRCS := $(wildcard llmc/*.cpp)
CPU_SRCS  := $(wildcard llmc/cpu/*.cpp)
CUDA_SRCS := $(wildcard llmc/cuda/*.cu)
SIMRT_SRCS := $(wildcard dev/cudasim/*.cpp)
CORE_OBJS := $(CORE_SRCS:%.cpp=$(BUILD)/core/%.o)
CPU_OBJS  := $(CPU_SRCS:%.cpp=$(BUILD)/cpu/%.o)
CUDA_OBJS := $(CUDA_SRCS:%.cu=$(BUILD)/cuda/%.o)
SIM_OBJS  := $(CUDA_SRCS:%.cu=$(BUILD)/sim/%.o) $(SIMRT_SRCS:%.cpp=$(BUILD)/sim/%.o)

TEST_SRCS     := $(wildcard test/unit/test_*.cpp)
SIM_TEST_SRCS := $(wildcard test/sim/test_*.cpp)
TEST_BINS     := $(TEST_SRCS:test/unit/%.cpp=$(BUILD)/test/%) $(SIM_TEST_SRCS:test/sim/test_%.cpp=$(BUILD)/test/sim_%)
TOOL_SRCS     := $(wildcard dev/tools/*.cpp)
TOOLS         := $(TOOL_SRCS:dev/tools/%.cpp=%)

CPU_BINS  := $(addprefix $(BIN_DIR)/,train_gpt2_cpu test_gpt2_cpu $(TOOLS))
CUDA_BINS := train_gpt2 test_gpt2

.PHONY: all cpu cuda test check test-binaries deps clean
all: cpu cuda cuda-bench test-binaries
cpu: $(CPU_BINS)
cuda: $(CUDA_BINS)
test-binaries: $(TEST_BINS) $(BUILD)/train_gpt2_sim $(BUILD)/test_gpt2_sim

# Quiet: one line per target ("  CXX    build/core/llmc/comm.o"), a compiler's errors and warnings in full;
# `make V=1` prints the command lines.
ifeq ($(V),1)
say =
else
say = @printf '  %-6s %s\n' $(1) $@;
endif

# ---- objects ------------------------------------------------------------------------------------------------
$(BUILD)/core/%.o: %.cpp
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) -c $< -o $@
$(BUILD)/cpu/%.o: %.cpp
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) -O3 -march=x86-64-v2 -c $< -o $@
$(BUILD)/cuda/%.o: %.cu
	@mkdir -p $(@D)
	$(call say,NVCC)$(NVCC) $(NVCCFLAGS) -c $< -o $@
$(BUILD)/sim/%.o: %.cu
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) $(SIMFLAGS) -x c++ -c $< -o $@
$(BUILD)/sim/%.o: %.cpp
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) $(SIMFLAGS) -c $< -o $@

# ---- binaries -----------------------------------------------------------------------------------------------
# The binaries' objects are kept (make would delete them as intermediate files, and relink from scratch).
.SECONDARY:
# Each binary's own source is compiled to $(BUILD)/main/NAME.o (or beside the test programs), then linked.
# The same train_gpt2.cu / test_gpt2.cu: g++ -x c++ gives the CPU backend, with -DLLMC_CUDA the CUDA backend, against
# the simulator the CUDA backend's real sources on the CPU.
$(BUILD)/main/%_cpu.o: %.cu
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) -x c++ -c $< -o $@
$(BUILD)/main/%_sim.o: %.cu
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) $(SIMFLAGS) -DLLMC_CUDA -x c++ -c $< -o $@
# The CUDA programs' own sources hold no device code (llmc/main_backend.h): g++ compiles them against the CUDA headers
# (half nvcc's time, which compiles every source once per architecture), nvcc links them with the kernels.
$(BUILD)/main/%_cuda.o: %.cu
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) -DLLMC_CUDA -isystem $(CUDA_HOME)/include -x c++ -c $< -o $@
$(BUILD)/tools/%.o: dev/tools/%.cpp
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) -c $< -o $@

$(BIN_DIR)/train_gpt2_cpu $(BIN_DIR)/test_gpt2_cpu: $(BIN_DIR)/%: $(BUILD)/main/%.o $(CORE_OBJS) $(CPU_OBJS)
	@mkdir -p $(@D)
	$(call say,LD)$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(CPU_LIBS) -o $@
train_gpt2 test_gpt2: %: $(BUILD)/main/%_cuda.o $(CORE_OBJS) $(CUDA_OBJS)
	$(call say,LD)$(NVCC) $(NVCCFLAGS) $(filter %.o,$^) $(CUDA_LIBS) -o $@
# Command-line tools (tokenizer, data preparation, generation): one dev/tools/NAME.cpp -> ./NAME.
$(addprefix $(BIN_DIR)/,$(TOOLS)): $(BIN_DIR)/%: $(BUILD)/tools/%.o $(CORE_OBJS) $(CPU_OBJS)
	@mkdir -p $(@D)
	$(call say,LD)$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(CPU_LIBS) -o $@
$(BUILD)/train_gpt2_sim $(BUILD)/test_gpt2_sim: $(BUILD)/%: $(BUILD)/main/%.o $(CORE_OBJS) $(SIM_OBJS)
	$(call say,LD)$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(CPU_LIBS) -o $@

# ---- tests --------------------------------------------------------------------------------------------------
$(BUILD)/test/obj/test_%.o: test/unit/test_%.cpp
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) -c $< -o $@
$(BUILD)/test/obj/sim_%.o: test/sim/test_%.cpp
	@mkdir -p $(@D)
	$(call say,CXX)$(CXX) $(CXXFLAGS) $(SIMFLAGS) -c $< -o $@
$(BUILD)/test/test_%: $(BUILD)/test/obj/test_%.o $(CORE_OBJS) $(CPU_OBJS)
	@mkdir -p $(@D)
	$(call say,LD)$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(CPU_LIBS) -o $@
$(BUILD)/test/sim_%: $(BUILD)/test/obj/sim_%.o $(CORE_OBJS) $(CPU_OBJS) $(SIM_OBJS)
	@mkdir -p $(@D)
	$(call say,LD)$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(CPU_LIBS) -o $@

# Per-kernel benchmarks for real GPUs (nvcc only, not part of `make test`): dev/cuda/NAME.cu -> build/cuda-bench/NAME.
BENCH_BINS := $(patsubst dev/cuda/%.cu,$(BUILD)/cuda-bench/%,$(wildcard dev/cuda/*.cu))
.PHONY: cuda-bench
cuda-bench: $(BENCH_BINS)
$(BUILD)/cuda-bench/obj/%.o: dev/cuda/%.cu
	@mkdir -p $(@D)
	$(call say,NVCC)$(NVCC) $(NVCCFLAGS) -c $< -o $@
$(BUILD)/cuda-bench/%: $(BUILD)/cuda-bench/obj/%.o
	$(call say,LD)$(NVCC) $(NVCCFLAGS) $< -lcublasLt $(BENCH_LIBS) -o $@
$(BUILD)/cuda-bench/host_side $(BUILD)/cuda-bench-check/host_side: BENCH_LIBS := -lnccl
# `make test` compiles and links the benchmarks for one architecture only (the last of GPU_ARCH), into their own
# folder: a check that they still build, at half the cost. The kernels they time are compiled for every architecture,
# with ptxas's spill checks, in the trainer's objects.
BENCH_CHECK_FLAGS := $(filter-out -gencode arch=%,$(NVCCFLAGS)) \
                     -gencode arch=compute_$(lastword $(GPU_ARCH)),code=sm_$(lastword $(GPU_ARCH))
BENCH_CHECK_BINS := $(BENCH_BINS:$(BUILD)/cuda-bench/%=$(BUILD)/cuda-bench-check/%)
.PHONY: cuda-bench-check
cuda-bench-check: $(BENCH_CHECK_BINS)
$(BUILD)/cuda-bench-check/obj/%.o: dev/cuda/%.cu
	@mkdir -p $(@D)
	$(call say,NVCC)$(NVCC) $(BENCH_CHECK_FLAGS) -c $< -o $@
$(BUILD)/cuda-bench-check/%: $(BUILD)/cuda-bench-check/obj/%.o
	$(call say,LD)$(NVCC) $(BENCH_CHECK_FLAGS) $< -lcublasLt $(BENCH_LIBS) -o $@

deps:
	@bash scripts/install_deps.sh

# ---- sanitizers ----------------------------------------------------------------------------------------------
# The CPU trainer, the tools and the CPU unit tests (not the simulator's: its fibers switch stacks under ASan's
# feet) with ASan + UBSan, every object and binary under build-asan/ (BUILD and BIN_DIR), so the normal build is
# untouched; then test/e2e/asan_test.sh runs a CI-sized set under them (no error, no leak). GCC 12 warns about
# maybe-uninitialised values inside its own <regex> headers at -O1 with sanitizers: that warning is off here.
ASAN_DIR   := build-asan
ASAN_FLAGS := -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
              -Wno-maybe-uninitialized
.PHONY: asan asan-build asan-binaries
asan: deps asan-build
	@bash test/e2e/asan_test.sh $(ASAN_DIR)
asan-build:
	@$(MAKE) --no-print-directory -j$(shell nproc 2>/dev/null || echo 2) BUILD=$(ASAN_DIR) BIN_DIR=$(ASAN_DIR)/bin \
	    SANITIZE="$(ASAN_FLAGS)" asan-binaries
# Only the programs and unit tests test/e2e/asan_test.sh runs (it reports one that is not built as a failure): the
# trainer and four tools; not test_gpt2_cpu or import_hf.
ASAN_PROGRAMS := train_gpt2_cpu generate prepare_data export_hf gpt2_tokenizer
ASAN_TESTS := layout schedule dataloader cpu_ops adamw sampler checkpoint trainer_host dist_info zero optimizer \
              hellaswag export_hf watchdog utf8_stream tokenizer comm optimizer_mpi
asan-binaries: $(addprefix $(BIN_DIR)/,$(ASAN_PROGRAMS)) $(ASAN_TESTS:%=$(BUILD)/test/test_%)

# deps first (it may install the libraries the build needs), then everything the tests run (and the sanitizer build
# that test/tests.list's last tests run), then the runner.
test: deps
	@$(MAKE) --no-print-directory -j$(shell nproc 2>/dev/null || echo 2) cpu cuda cuda-bench-check test-binaries
	@$(MAKE) --no-print-directory asan-build
	@bash test/run_tests.sh

# The inner loop: the CPU and simulator programs (nvcc, the CUDA benchmarks and the ASan build are left to `make
# test`) and the tests test/tests.list marks --quick.
check: deps
	@$(MAKE) --no-print-directory -j$(shell nproc 2>/dev/null || echo 2) cpu test-binaries
	@TEST_TIER=quick bash test/run_tests.sh

# Planted bugs in the CUDA code, each run against the tests that exercise it (dev/mutation/run.py, docs/cudasim.md).
# Not part of `make test`: it rebuilds and reruns the simulator tests once per mutation (about an hour on 2 cores).
.PHONY: mutation-test
mutation-test:
	@python3 dev/mutation/run.py $(MUTATION_ARGS)

clean:
	rm -rf $(BUILD) $(CPU_BINS) $(CUDA_BINS)

# Header dependencies (-MMD): every object's .d beside it under build/ (the binaries' own sources' in build/main,
# build/tools, build/test/obj), so editing a header they include rebuilds them (test/e2e/makefile_deps_test.sh).
-include $(shell find $(BUILD) -path $(BUILD)/mutation -prune -o -name '*.d' -print 2>/dev/null)

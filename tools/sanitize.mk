# Builds the replay driver (ffi/testing/replay.cc) under a sanitizer with g++; tools/sanitize.sh
# runs it from the repository root:
#   make -f tools/sanitize.mk VARIANT=tsan|asan -j2
# Objects go to build/sanitize-<variant>/ with their header dependencies, so a re-run recompiles
# only what changed; a change of flags recompiles everything. The driver holds the CPU handlers and
# the emulated CUDA handlers (ffi/cuda/*.cu as host C++ on ffi/cuda_emulation). Under TSan the
# emulated runtime itself is not instrumented: it declares to TSan the ordering CUDA guarantees
# (-DJGO_EMULATION_TSAN, see ffi/cuda_emulation/emulation.cc).

VARIANT ?= tsan
XLA_FFI_INCLUDE ?= third_party/xla_ffi

BASE_FLAGS := -std=c++17 -g1 -O1 -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter -pthread \
              -Iffi -Iffi/common -isystem $(XLA_FFI_INCLUDE)
sanitizer_tsan := -fsanitize=thread
sanitizer_asan := -fsanitize=address,undefined -fno-sanitize-recover=undefined
ifndef sanitizer_$(VARIANT)
  $(error VARIANT must be tsan or asan)
endif
CXXFLAGS := $(BASE_FLAGS) $(sanitizer_$(VARIANT))
CUDA_FLAGS := -x c++ -DJGO_CUDA_EMULATION -Iffi/cuda_emulation -Wno-unknown-pragmas
RUNTIME_FLAGS_tsan := $(BASE_FLAGS) -DJGO_EMULATION_TSAN -Iffi/cuda_emulation
RUNTIME_FLAGS_asan := $(CXXFLAGS) -Iffi/cuda_emulation
TESTING_FLAGS := -DJGO_WITH_CUDA_EMULATION
# -g1: the functions and line tables the sanitizers' stack traces print (function, file:line), not the variables'
# descriptions a debugger reads: the TSan build took 152 CPU-s instead of 230, the ASan build 211 (g++ 12.2,
# 2026-11-30; ffi/cuda/message_passing.cu under TSan 21 instead of 29).
# The CPU handlers and the emulated CUDA handlers under ASan at -O0: the checks are the same, the compile far
# cheaper (at -O1 the CPU handlers' vectorised templates, gno.cc above all, took 10-25 minutes on 2 cores; the
# engine's emulated ffi/cuda/message_passing.cu and update_efeat.cu take 156 and 117 CPU-s at -O1, 45 and 34 at -O0).
CPU_FLAGS_asan := -O0
CUDA_FLAGS_asan := -O0
# GCC warns, at each inlined call site (thousands of lines), that TSan does not model the fence of the emulated
# __threadfence (ffi/cuda_emulation/cuda_runtime.h); the order CUDA's fences give reaches TSan through the
# emulated atomics and collectives (ffi/cuda_emulation/jgo_emulation/device.h, emulation.cc).
CUDA_FLAGS_tsan := -Wno-tsan

BUILD := build/sanitize-$(VARIANT)
OUTPUT := $(BUILD)/replay
SOURCES := $(wildcard ffi/cpu/*.cc) $(wildcard ffi/testing/*.cc) $(wildcard ffi/cuda/*.cu) \
           ffi/cuda_emulation/emulation.cc
OBJECTS := $(SOURCES:%=$(BUILD)/%.o)

$(OUTPUT): $(OBJECTS)
	$(CXX) $(CXXFLAGS) $^ -o $@

$(BUILD)/ffi/testing/%.cc.o: ffi/testing/%.cc $(BUILD)/flags
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $(TESTING_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/ffi/cuda_emulation/emulation.cc.o: ffi/cuda_emulation/emulation.cc $(BUILD)/flags
	@mkdir -p $(@D)
	$(CXX) $(RUNTIME_FLAGS_$(VARIANT)) -MMD -MP -c $< -o $@

$(BUILD)/%.cc.o: %.cc $(BUILD)/flags
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $(CPU_FLAGS_$(VARIANT)) -MMD -MP -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(BUILD)/flags
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $(CUDA_FLAGS) $(CUDA_FLAGS_$(VARIANT)) -MMD -MP -c $< -o $@

# The flags of the last build, rewritten (so recompiling everything) only when they change.
FLAGS_LINE := $(CXX) $(CXXFLAGS) | $(TESTING_FLAGS) | $(CUDA_FLAGS) $(CUDA_FLAGS_$(VARIANT)) | $(RUNTIME_FLAGS_$(VARIANT)) | $(CPU_FLAGS_$(VARIANT))
$(BUILD)/flags: FORCE
	@mkdir -p $(@D)
	@echo '$(FLAGS_LINE)' | cmp -s - $@ || echo '$(FLAGS_LINE)' > $@

.PHONY: FORCE
FORCE:

-include $(OBJECTS:.o=.d)

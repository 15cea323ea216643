// What the GEMM tuning (matmul.cuh, GemmRunner) exposes to the backend's users: one candidate algorithm as the timer
// sees it, and the timer's type (tests inject their own; docs/cuda.md, "Tuned GEMMs"). No kernels here.
#pragma once

#include <functional>

namespace llmc {

// One algorithm the heuristic offered for a plan.
struct GemmCandidate {
    int index = 0;       // position in the heuristic's list (0: its first choice)
    int id = 0;          // CUBLASLT_ALGO_CONFIG_ID
    int split_k = 1;     // CUBLASLT_ALGO_CONFIG_SPLITK_NUM
    float waves = 0.0f;  // the heuristic's wavesCount
};
// Times one candidate: `launch` enqueues the GEMM with it (on the real buffers); returns milliseconds per launch.
using GemmTimer = std::function<float(const GemmCandidate&, const std::function<void()>& launch)>;

}  // namespace llmc

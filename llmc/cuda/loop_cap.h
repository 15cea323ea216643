// The block count of a grid-stride or chunked launch is capped (the reduction's 1024 partial sums, the layernorm
// backward's 1024 row blocks): past the cap, each block loops over more work. At test shapes the cap is never
// reached, so those loops' later iterations would only run at production sizes. Under the simulator,
// CUDASIM_GRID_CAP=n lowers every such cap to n (docs/cudasim.md, "Loops at production sizes"), so the kernel tests
// run the loops several times at small shapes. On a GPU the caps are what the code says.
#pragma once

#include <cstddef>

#include "platform.cuh"

namespace llmc {

inline size_t loop_blocks_cap(size_t cap) {
    const size_t test_cap = test_grid_cap();  // 0 on a GPU (llmc/cuda/platform.cuh)
    return test_cap && test_cap < cap ? test_cap : cap;
}

}  // namespace llmc

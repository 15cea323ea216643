// Tensor-core warp instructions and cp.async on the CPU (declared in include/cudasim_mma.h, which has the semantics).
//
// Fragment layouts (PTX ISA 9.0, 9.7.14.5.8, for .bf16 A/B and .f32 C/D), with g = lane >> 2, t = lane % 4:
//   A (16x16): register j (0..3) holds elements a_{2j}, a_{2j+1} (low half first); a_i sits at
//              row g + 8 * (i in {2,3,6,7}), column 2t + (i & 1) + 8 * (i >= 4)
//   B (16x8):  register j (0..1) holds b_{2j}, b_{2j+1}; b_i sits at row 2t + (i & 1) + 8 * (i >= 2), column g
//   C, D:      c_i (0..3) sits at row g + 8 * (i >= 2), column 2t + (i & 1)
// The inverse maps below answer "which lane and which half-register holds element (row, col)", which is what a lane
// needs to read the other lanes' contributions.
#include <cuda_runtime.h>

#include "dev/cudasim/include/cudasim.h"
#include "dev/cudasim/include/cudasim_mma.h"
#include "dev/cudasim/state.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace cudasim {
namespace {

constexpr unsigned kFullWarp = 0xffffffffu;

// The 32 lanes' 8-byte contributions to one collective, copied out of the scheduler's per-fiber view.
struct Gathered {
    uint64_t v[32];
};
Gathered gather(uint64_t mine, const char* what) {
    const detail::WarpView& w = detail::warp_collective(kFullWarp, mine);
    if (w.present != kFullWarp) {
        std::string msg = std::string(what) + " needs all 32 lanes of the warp (the block has a partial warp)";
        detail::device_fail(msg.c_str());
    }
    Gathered g;
    std::memcpy(g.v, w.values, sizeof g.v);
    return g;
}

uint16_t half_of(uint32_t reg, int hi) { return (uint16_t)(hi ? reg >> 16 : reg & 0xffffu); }
double bf16_bits_to_double(uint16_t bits) {
    const uint32_t u = (uint32_t)bits << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return (double)f;
}

// A element (row, col) of the 16x16 tile: a_i with i = 2 * reg + half.
double a_element(const Gathered& a01, const Gathered& a23, int row, int col) {
    const int lane = (row % 8) * 4 + (col % 8) / 2;
    const int i = (row >= 8 ? 2 : 0) + (col >= 8 ? 4 : 0) + (col & 1);
    const Gathered& src = i < 4 ? a01 : a23;
    const uint32_t reg = (uint32_t)(src.v[lane] >> (32 * ((i / 2) % 2)));
    return bf16_bits_to_double(half_of(reg, i & 1));
}
// B element (row = k, col = n) of the 16x8 tile: b_i with i = 2 * reg + half.
double b_element(const Gathered& b, int row, int col) {
    const int lane = col * 4 + (row % 8) / 2;
    const int i = (row >= 8 ? 2 : 0) + (row & 1);
    const uint32_t reg = (uint32_t)(b.v[lane] >> (32 * (i / 2)));
    return bf16_bits_to_double(half_of(reg, i & 1));
}

int lane_id() { return (int)((threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y) % 32); }
int linear_thread() { return (int)(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y); }

// ---- cp.async state: per thread of the running block ------------------------------------------------------------
struct Copy {
    void* dst;
    const void* src;
    int size, src_bytes;  // cp-size, and the bytes read from src (the rest zero-filled)
    bool landed;          // written at the issue (CpAsyncLanding::AtIssue); still pending until waited for
};
struct ThreadCopies {
    std::vector<Copy> open;                  // issued, not yet committed
    std::deque<std::vector<Copy>> groups;    // committed, oldest first
};
struct AsyncState {
    uint64_t launch = ~uint64_t(0);
    uint3 block{~0u, ~0u, ~0u};
    std::vector<ThreadCopies> threads;
};
AsyncState& async_state() {
    static AsyncState s;
    return s;
}
bool is_current_block(const AsyncState& s) {
    const uint3 b = blockIdx;
    return s.launch == launch_count() && s.block.x == b.x && s.block.y == b.y && s.block.z == b.z;
}
// The calling thread's queues; a new block (or launch) starts empty. (The scheduler checks at the end of every block
// that no thread left copies it never waited for: detail::threads_with_unwaited_copies.)
ThreadCopies& my_copies() {
    AsyncState& s = async_state();
    const uint3 b = blockIdx;
    if (!is_current_block(s)) {
        s.launch = launch_count();
        s.block = b;
        s.threads.assign((size_t)blockDim.x * blockDim.y * blockDim.z, ThreadCopies());
    }
    return s.threads[(size_t)linear_thread()];
}
void land(const Copy& c) {
    std::memcpy(c.dst, c.src, (size_t)c.src_bytes);
    std::memset(static_cast<char*>(c.dst) + c.src_bytes, 0, (size_t)(c.size - c.src_bytes));
}
void perform(const std::vector<Copy>& group) {
    for (const Copy& c : group)
        if (!c.landed) land(c);
}
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

CpAsyncLanding initial_landing() {
    const char* e = std::getenv("CUDASIM_CP_ASYNC");
    if (!e || !*e || std::strcmp(e, "at-wait") == 0) return CpAsyncLanding::AtWait;
    if (std::strcmp(e, "at-issue") == 0) return CpAsyncLanding::AtIssue;
    std::fprintf(stderr, "cudasim: CUDASIM_CP_ASYNC=%s: expected at-wait or at-issue\n", e);
    std::exit(1);
}
CpAsyncLanding& landing_mode() {
    static CpAsyncLanding mode = initial_landing();
    return mode;
}

}  // namespace

void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    const Gathered a01 = gather((uint64_t)a[0] | (uint64_t)a[1] << 32, "mma.sync");
    const Gathered a23 = gather((uint64_t)a[2] | (uint64_t)a[3] << 32, "mma.sync");
    const Gathered bb = gather((uint64_t)b[0] | (uint64_t)b[1] << 32, "mma.sync");
    const int lane = lane_id(), g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        double sum = 0.0;
        for (int k = 0; k < 16; k++) sum += a_element(a01, a23, row, k) * b_element(bb, k, col);
        d[i] = (float)(sum + (double)c[i]);
    }
}

void ldmatrix(uint32_t* r, int count, const void* row, bool trans) {
    const char* what = trans ? "ldmatrix.trans" : "ldmatrix";
    const int lane = lane_id();
    // Lanes 0 .. 8 count - 1 give the row addresses (the others' are ignored, as on the GPU).
    if (lane < 8 * count && !aligned16(row)) detail::device_fail("ldmatrix: a row address is not 16-byte aligned");
    const Gathered rows = gather(reinterpret_cast<uintptr_t>(row), what);
    for (int m = 0; m < count; m++) {
        uint16_t e[2];
        for (int h = 0; h < 2; h++) {
            // Without trans: row lane/4, column 2(lane%4)+h of matrix m. With trans: the transpose's element, i.e.
            // row 2(lane%4)+h, column lane/4 of the matrix as stored.
            const int stored_row = trans ? 2 * (lane % 4) + h : lane / 4;
            const int stored_col = trans ? lane / 4 : 2 * (lane % 4) + h;
            const auto* p = reinterpret_cast<const uint16_t*>(rows.v[m * 8 + stored_row]);
            std::memcpy(&e[h], p + stored_col, 2);
        }
        r[m] = (uint32_t)e[0] | (uint32_t)e[1] << 16;
    }
}

void cp_async(void* dst_shared, const void* src_global, int size, int src_bytes) {
    const uintptr_t mask = (uintptr_t)size - 1;
    if ((reinterpret_cast<uintptr_t>(dst_shared) & mask) || (src_bytes > 0 && (reinterpret_cast<uintptr_t>(src_global) & mask)))
        detail::device_fail("cp.async: the source and destination must be aligned to the copy's size");
    const Copy c{dst_shared, src_global, size, src_bytes, landing_mode() == CpAsyncLanding::AtIssue};
    if (c.landed) land(c);
    my_copies().open.push_back(c);
}

void cp_async_commit() {
    ThreadCopies& t = my_copies();
    t.groups.push_back(std::move(t.open));
    t.open.clear();
}

void cp_async_wait(int pending) {
    ThreadCopies& t = my_copies();
    while (t.groups.size() > (size_t)(pending < 0 ? 0 : pending)) {
        perform(t.groups.front());
        t.groups.pop_front();
    }
}

namespace detail {
int threads_with_unwaited_copies() {
    AsyncState& s = async_state();
    if (!is_current_block(s)) return 0;  // the block issued no copy
    int n = 0;
    for (ThreadCopies& t : s.threads) {
        bool pending = !t.open.empty();
        for (const std::vector<Copy>& grp : t.groups) pending = pending || !grp.empty();
        n += pending;
        t = ThreadCopies();
    }
    return n;
}
}  // namespace detail

void set_cp_async_landing(CpAsyncLanding landing) { landing_mode() = landing; }
CpAsyncLanding cp_async_landing() { return landing_mode(); }

}  // namespace cudasim

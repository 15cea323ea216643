"""Planted bugs for `make mutation-test` (dev/mutation/run.py; docs/cudasim.md, "Mutation testing").

Each mutation replaces one exact snippet of one file, which must occur exactly once: when the code changes, the
harness stops on the stale entry and names it, so the list is easy to keep up to date. Classes:
  stream    a missing or misordered wait between streams / the host (event, stream synchronisation, pinned reuse)
  shared    shared memory: a missing barrier, __syncwarp or cp.async wait, a read of a slot no thread wrote
  bounds    an out-of-bounds global load or store
  tail      partial blocks, row or column tails, causal-mask edges
  vector    the host's choice between a kernel's 16-byte vector path and its scalar path
  numerics  accumulation precision, epsilon, derivative, seed offsets, online-softmax rescaling, MMA fragment layout
  cublaslt  the GEMM runner's alignment declarations and fallbacks
  limits    the device's limits: a launch's dynamic shared memory smaller than the kernel's layout, shared memory
            beyond an architecture's opt-in limit (docs/cudasim.md, "Device profiles")
  order     a reduction order assumed: the simulated NCCL summing in rank order, or once-rounded, as no NCCL does
            (the tests must notice the simulator losing its realistic orders: docs/cudasim.md, "NCCL reduction
            orders")
  ptx       the inline-PTX instruction text of llmc/cuda/mma.cuh altered (the simulator executes that text)
  loop      a bug in a grid-stride or chunked loop's second iteration (the CUDASIM_GRID_CAP runs reach it)
  cache     state cached across calls keeping the first caller's pointers (the 3-layer simulated reference)
  nvcc      the lines of llmc/cuda/platform.cuh only nvcc compiles (the operand kinds of mma.cuh's PTX wrappers,
            whose operand lists are written once for both builds): caught when nvcc refuses the planted code, else by the checks
            of the nvcc object (run.py builds the CUDA programs for these and runs sass_check and resource_check)
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    id: str
    cls: str
    file: str
    find: str
    replace: str
    why: str


MUTATIONS = [
    # ---- stream order (llmc/grad_reducer.h, llmc/grad_bucket_pool.h, llmc/zero_optimizer.h, llmc/cuda/...) -------
    Mutation(
        "optimizer-reduce-no-main-wait", "stream", "llmc/grad_reducer.h",
        "    virtual void finish_micro_step(bool) { be_.main_waits_comm(); }\n",
        "    virtual void finish_micro_step(bool) {}\n",
        "ZeRO 0/1: the main stream no longer waits for the comm stream's gradient reductions"),
    Mutation(
        "optimizer-bucket-no-comm-wait", "stream", "llmc/grad_reducer.h",
        "        check_announced(bucket);\n        be_.comm_waits_main();\n        reduce_bucket(bucket);\n",
        "        check_announced(bucket);\n        reduce_bucket(bucket);\n",
        "a bucket's reduction may run before the backward has written its gradients"),
    Mutation(
        "optimizer-gather-no-comm-wait", "stream", "llmc/zero_optimizer.h",
        "            be_.comm_waits_main();  // the gather reads the shard AdamW just wrote\n",
        "",
        "ZeRO-1's parameter gather may run before AdamW wrote the shard"),
    Mutation(
        "optimizer-forward-no-gather-wait", "stream", "llmc/zero_optimizer.h",
        "        if (stage_ >= 1) be_.main_waits_comm();  // the next forward reads the gathered parameters\n",
        "",
        "the next forward may read parameters before the gather wrote them"),
    Mutation(
        "zero2-buffer-reuse-no-event-wait", "stream", "llmc/grad_bucket_pool.h",
        "        this->be_.stream_wait_event(this->be_.main_stream(), k.reduced);\n",
        "",
        "ZeRO 2: a bucket buffer is read into the accumulator and zeroed for the next bucket without waiting for "
        "its reduction's event"),
    Mutation(
        "zero2-event-on-main-stream", "stream", "llmc/grad_bucket_pool.h",
        "    void bucket_reduced(size_t b, Stream st) override { this->be_.event_record(slot_of(b).reduced, st); }\n",
        "    void bucket_reduced(size_t b, Stream st) override {\n"
        "        this->be_.event_record(slot_of(b).reduced, this->be_.main_stream());\n    }\n",
        "ZeRO 2: the buffer's event is recorded on the main stream, not after the reduction on the comm stream"),
    Mutation(
        "backend-wait-before-record", "stream", "llmc/cuda/cuda_backend.cu",
        "    CUDA_CHECK(cudaEventRecord(main_done_, main_));\n    CUDA_CHECK(cudaStreamWaitEvent(comm_, main_done_, 0));\n",
        "    CUDA_CHECK(cudaStreamWaitEvent(comm_, main_done_, 0));\n    CUDA_CHECK(cudaEventRecord(main_done_, main_));\n",
        "comm_waits_main waits for the event before recording it: it waits for the previous record"),
    Mutation(
        "backend-copy-to-host-no-sync", "stream", "llmc/cuda/cuda_backend.cu",
        "    if (bytes) CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, main_));\n"
        "    CUDA_CHECK(cudaStreamSynchronize(main_));\n",
        "    if (bytes) CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, main_));\n",
        "copy_to_host returns before its download ran"),
    Mutation(
        "backend-pinned-slot-reuse", "stream", "llmc/cuda/cuda_backend.cu",
        "    CUDA_CHECK(cudaEventSynchronize(encoder_upload_done_[slot]));\n",
        "",
        "the encoder's pinned grouping buffer is rewritten while its previous upload may be pending"),
    Mutation(
        "nccl-barrier-no-device-sync", "stream", "llmc/cuda/comm_nccl.cu",
        "        CUDA_CHECK(cudaDeviceSynchronize());\n        NCCL_CHECK(ncclAllReduce(staging_",
        "        NCCL_CHECK(ncclAllReduce(staging_",
        "the barrier's collective on the legacy stream is not ordered after the non-blocking streams' collectives"),
    Mutation(
        "nccl-host-channel-no-device-sync", "stream", "llmc/cuda/comm_nccl.cu",
        "        CUDA_CHECK(cudaDeviceSynchronize());\n        grow_staging(bytes * world);\n",
        "        grow_staging(bytes * world);\n",
        "the host channel's gather on the legacy stream is not ordered after the non-blocking streams' collectives"),
    # ---- shared memory ---------------------------------------------------------------------------------------
    Mutation(
        "common-block-sum-no-raw-barrier", "shared", "llmc/cuda/common.cuh",
        "    if (lane == 0) scratch[warp] = v;\n    __syncthreads();\n    v = lane < num_warps ? scratch[lane] : 0.0f;\n",
        "    if (lane == 0) scratch[warp] = v;\n    v = lane < num_warps ? scratch[lane] : 0.0f;\n",
        "block_sum reads the per-warp partials before the other warps wrote them"),
    Mutation(
        "common-block-sum-reads-unwritten", "shared", "llmc/cuda/common.cuh",
        "    v = lane < num_warps ? scratch[lane] : 0.0f;\n    return warp_sum(v);\n",
        "    (void)num_warps;\n    v = scratch[lane];\n    return warp_sum(v);\n",
        "block_sum reads all 32 partial slots, also those no warp of a smaller block wrote"),
    Mutation(
        "classifier-reads-unwritten-partials", "shared", "llmc/cuda/classifier.cuh",
        "    m = lane < num_warps ? smax[lane] : -3.402823466e38f;\n    s = lane < num_warps ? ssum[lane] : 0.0f;\n",
        "    (void)num_warps;\n    m = smax[lane];\n    s = ssum[lane];\n",
        "the classifier combines all 32 per-warp slots, also unwritten ones"),
    Mutation(
        "classifier-target-read-after-overwrite", "shared", "llmc/cuda/classifier.cuh",
        "    if (threadIdx.x == 0) *loss = valid ? logf(s) + m - x_target : NAN;\n",
        "    if (threadIdx.x == 0) *loss = valid ? logf(s) + m - to_float(x[target]) : NAN;\n",
        "thread 0 reads the target logit when it writes the loss, after the block's last barrier, when other "
        "threads may already have overwritten the row with the gradient"),
    Mutation(
        "classifier-prefetch-no-wait", "shared", "llmc/cuda/classifier.cuh",
        "        cp_async_wait<0>();  // this thread's copies of row `row` have landed",
        "        // (no wait)  this thread's copies of row `row` have landed",
        "the prefetch kernel reads its shared-memory slots before its cp.async copies of the row have landed"),
    Mutation(
        "classifier-prefetch-no-row-barrier", "shared", "llmc/cuda/classifier.cuh",
        "        // several microseconds.\n        __syncthreads();\n",
        "        // several microseconds.\n",
        "the prefetch kernel has no barrier at the top of a row: a fast warp writes the next row's per-warp partials "
        "while a slower warp still reads this row's, and refills slots before its own loads of them are ordered"),
    Mutation(
        "reduce-column-sums-no-barrier", "shared", "llmc/cuda/reduce.cuh",
        "    for (int e = 0; e < W; e++) warp_sums[warp][lane * W + e] = acc[e];\n    __syncthreads();\n",
        "    for (int e = 0; e < W; e++) warp_sums[warp][lane * W + e] = acc[e];\n",
        "column sums: warp 0 reads the other warps' partials before they wrote them"),
    Mutation(
        "layernorm-backward-no-partials-init", "shared", "llmc/cuda/layernorm.cuh",
        "    for (unsigned j = lane; j < packs; j += 32) {  // the same lanes own these packs below\n"
        "        store_floats(dw + j * W, zero);\n"
        "        store_floats(db + j * W, zero);\n"
        "    }\n",
        "    (void)zero;\n",
        "the backward's shared dweight/dbias slices are not zeroed before they are accumulated"),
    Mutation(
        "layernorm-backward-no-barrier-before-slice-sums", "shared", "llmc/cuda/layernorm.cuh",
        "    __syncthreads();\n    const size_t G = gridDim.x;\n",
        "    const size_t G = gridDim.x;\n",
        "the block adds its warps' shared slices before every warp has finished its rows"),
    Mutation(
        "attention-forward-no-barrier-between-tiles", "shared", "llmc/cuda/attention.cuh",
        "        __syncthreads();  // tile kt visible to all; every warp is done with tile kt - 1, whose buffer is "
        "refilled next\n",
        "",
        "flash forward: a warp reads a K/V tile other threads' cp.async have not landed, and the next tile's copies "
        "overwrite a buffer other warps still read"),
    Mutation(
        "attention-forward-pipeline-wait-one-short", "shared", "llmc/cuda/attention.cuh",
        "        cp_async_wait<STAGES - 2>();  // tile kt has landed",
        "        cp_async_wait<STAGES - 1>();  // tile kt has landed",
        "flash forward's cp.async pipeline waits for one group too few: the key tile in use may not have landed"),
    Mutation(
        "attention-dq-no-cp-async-wait", "shared", "llmc/cuda/attention.cuh",
        "        cp_async_wait<0>();\n        __syncthreads();\n        if (kt + 1 < num_kt) {\n",
        "        __syncthreads();\n        if (kt + 1 < num_kt) {\n",
        "dQ kernel: the barrier is passed before the thread's cp.async group of K / V has completed, so the MMAs "
        "read key and value tiles that have not arrived"),
    Mutation(
        "attention-dkv-refill-without-barrier", "shared", "llmc/cuda/attention.cuh",
        "        cp_async_wait<0>();\n        __syncthreads();\n        if (qt + 1 < num_qt) load_queries(",
        "        cp_async_wait<0>();\n        if (qt + 1 < num_qt) load_queries(",
        "dK/dV kernel: no barrier between query tiles: tiles read before other threads' copies landed, buffers "
        "refilled while other warps read them"),
    Mutation(
        "attention-dkv-refill-before-barrier", "shared", "llmc/cuda/attention.cuh",
        "        __syncthreads();\n        if (qt + 1 < num_qt) load_queries(qt + 1, 1 - cur);\n",
        "        if (qt + 1 < num_qt) load_queries(qt + 1, 1 - cur);\n        __syncthreads();\n",
        "dK/dV kernel: the next query tile's copies (Q, dO, L, D) are issued before the barrier, into the buffer "
        "other warps may still be reading"),
    Mutation(
        "attention-dkv-copies-before-barrier", "shared", "llmc/cuda/attention.cuh",
        "        __syncthreads();\n        if (qt + 1 < num_qt) load_queries(qt + 1, 1 - cur);\n",
        "        if (qt + 1 < num_qt) {\n"
        "            load_tile_async<HS, BQ, NTHREADS>(sQ + (1 - cur) * BQ * S, q, 3 * C, (qt + 1) * BQ, T, tid);\n"
        "            load_tile_async<HS, BQ, NTHREADS>(sdO + (1 - cur) * BQ * S, dO, C, (qt + 1) * BQ, T, tid);\n"
        "        }\n"
        "        __syncthreads();\n"
        "        if (qt + 1 < num_qt && tid < BQ) {\n"
        "            const int row = (qt + 1) * BQ + tid;\n"
        "            sL[(1 - cur) * BQ + tid] = row < T ? Lg[row] : 0.0f;\n"
        "            sD[(1 - cur) * BQ + tid] = row < T ? Dg[row] : 0.0f;\n"
        "        }\n",
        "dK/dV kernel: only the next query tile's cp.async copies are issued before the barrier (the L / D stores "
        "after it): a copy landing at once overwrites Q / dO rows other warps still read, which only the simulator's "
        "CUDASIM_CP_ASYNC=at-issue mode can show (sim_attention_cp_async_at_issue)"),
    Mutation(
        "attention-store-rows-no-syncwarp", "shared", "llmc/cuda/attention.cuh",
        "    __syncwarp();\n    for (int c = lane; c < 16 * MT * kChunks; c += 32) {\n",
        "    for (int c = lane; c < 16 * MT * kChunks; c += 32) {\n",
        "the output staging tile is copied out before the other lanes of the warp have written their fragments"),
    # ---- bounds ------------------------------------------------------------------------------------------------
    Mutation(
        "encoder-forward-off-by-one", "bounds", "llmc/cuda/encoder.cuh",
        "    if (i >= N * C) return;\n",
        "    if (i > N * C) return;\n",
        "the encoder's thread just past the end reads a token past the input and writes past the output"),
    Mutation(
        "encoder-forward-reads-null-wpe", "bounds", "llmc/cuda/encoder.cuh",
        "    if (wpe) {\n",
        "    if (true) {\n",
        "the encoder without a position embedding adds the row of a null wpe"),
    Mutation(
        "encoder-backward-dwpe-on-null", "bounds", "llmc/cuda/encoder.cuh",
        "    if (!dwpe) return true;\n",
        "",
        "the encoder backward without a position embedding still launches the dwpe kernel, on a null dwpe"),
    Mutation(
        "activation-forward-off-by-one", "bounds", "llmc/cuda/activation.cuh",
        "    if (i >= n) return;\n    float x[W];\n",
        "    if (i > n) return;\n    float x[W];\n",
        "the activation forward (GELU, ReLU^2) reads and writes one pack past the end"),
    Mutation(
        "adamw-off-by-one", "bounds", "llmc/cuda/adamw.cuh",
        "    if (i >= n) return;\n    float g[W], mi[W], vi[W], w[W];\n",
        "    if (i > n) return;\n    float g[W], mi[W], vi[W], w[W];\n",
        "AdamW updates one pack past its shard"),
    Mutation(
        "attention-tile-load-past-end", "bounds", "llmc/cuda/attention.cuh",
        "        const bool ok = row0 + r + i * kRowStep < T;\n",
        "        const bool ok = row0 + r + i * kRowStep <= T;\n",
        "the attention tile loads copy row T (past the sequence, past the buffer for the last one) instead of "
        "zero-filling it"),
    Mutation(
        "attention-dkv-grid-order-swapped", "bounds", "llmc/cuda/attention.cuh",
        "    const int kt = (int)blockIdx.x, bh = head0 + (int)blockIdx.y;",
        "    const int kt = (int)blockIdx.y, bh = head0 + (int)blockIdx.x;",
        "dK/dV kernel: the block index decoded the other way round (head and key tile swapped)"),
    Mutation(
        "common-sum-rows-unroll-past-end", "bounds", "llmc/cuda/common.cuh",
        "    for (; i + kReduceUnroll <= n; i += kReduceUnroll) {\n",
        "    for (; i < n; i += kReduceUnroll) {\n",
        "sum_rows' unrolled loop loads up to 3 rows past the last one"),
    # ---- tails -------------------------------------------------------------------------------------------------
    Mutation(
        "matmul-bias-partials-no-row-clamp", "tail", "llmc/cuda/matmul.cuh",
        "    const size_t r0 = g * rows_per_block, r1 = r0 + rows_per_block < N ? r0 + rows_per_block : N;\n",
        "    const size_t r0 = g * rows_per_block, r1 = r0 + rows_per_block;\n",
        "the last row block of the bias gradient runs past the last row"),
    Mutation(
        "layernorm-backward-no-row-clamp", "tail", "llmc/cuda/layernorm.cuh",
        "    const size_t row_end = row_begin + rows_per_block < N ? row_begin + rows_per_block : N;\n",
        "    const size_t row_end = row_begin + rows_per_block;\n",
        "the last block of the layernorm backward runs past the last row"),
    Mutation(
        "reduce-column-sums-tail-write", "tail", "llmc/cuda/reduce.cuh",
        "    if (threadIdx.x < 32 && c < C) add_floats(out + c, s);\n",
        "    if (threadIdx.x < 32) add_floats(out + c, s);\n",
        "column sums write the columns past C of the last column block"),
    Mutation(
        "encoder-wte-col-chunks-floor", "tail", "llmc/cuda/encoder.cuh",
        "col_chunks = ceil_div(packs, block);\n",
        "col_chunks = packs / block;\n",
        "the dwte launch counts too few channel chunks per position chunk when the packs do not fill the blocks"),
    Mutation(
        "launch-grid-size-floor", "tail", "llmc/cuda/launch.cuh",
        "    size_t g = ceil_div(n, block);\n",
        "    size_t g = n / block;\n",
        "grid_size rounds down: the last partial block of every 1-D launch is missing"),
    Mutation(
        "common-sum-rows-drops-last-row", "tail", "llmc/cuda/common.cuh",
        "    for (; i < n; i++) {\n",
        "    for (; i + 1 < n; i++) {\n",
        "sum_rows' remainder loop stops one row early when the row count is not a multiple of the unroll"),
    Mutation(
        "attention-forward-mask-sees-next-key", "tail", "llmc/cuda/attention.cuh",
        "[T](int row, int key) { return key <= row && key < T; }",
        "[T](int row, int key) { return key <= row + 1 && key < T; }",
        "flash forward's causal mask is off by one: each query also sees the next key"),
    Mutation(
        "attention-dkv-l-d-read-past-t", "bounds", "llmc/cuda/attention.cuh",
        "            const bool ok = row < T;\n            cp_async_4(sL + nb * BQ + tid, ok ? Lg + row : Lg, ok);\n",
        "            const bool ok = row <= T;\n            cp_async_4(sL + nb * BQ + tid, ok ? Lg + row : Lg, ok);\n",
        "the dK/dV kernel copies the L and D of row T (one past the head's rows): the next head's values, or past the "
        "end of the buffer for the last head"),
    Mutation(
        "attention-dq-d-of-other-row-half", "numerics", "llmc/cuda/attention.cuh",
        "                s[mt][c * DPK / 8 + nt][i] *= dp[mt][nt][i] - D[mt][i / 2];\n",
        "                s[mt][c * DPK / 8 + nt][i] *= dp[mt][nt][i] - D[mt][i % 2];\n",
        "the dQ kernel's dS = P (dP - D) takes D of the wrong row of the lane's pair (rows g and g + 8)"),
    Mutation(
        "attention-dq-rowdot-of-other-half", "numerics", "llmc/cuda/attention.cuh",
        "            if (t4 == 0 && row < T) rowdot[(size_t)bh * T + row] = D[mt][hh];\n",
        "            if (t4 == 0 && row + 8 - 16 * hh < T) rowdot[(size_t)bh * T + row + 8 - 16 * hh] = D[mt][hh];\n",
        "the dQ kernel hands the dK/dV kernel the D of the row 8 away (rows g and g + 8 swapped; reading the other "
        "half's D[mt][1 - hh] instead reads row g + 8's before it is computed, which g++ refuses)"),
    Mutation(
        "attention-dq-mask-lets-next-key-in", "tail", "llmc/cuda/attention.cuh",
        "            mask_tile(s, r0, k0, lane, 0.0f, [T](int row, int key) { return key <= row && key < T && row < T; });\n",
        "            mask_tile(s, r0, k0, lane, 0.0f, [T](int row, int key) { return key <= row + 1 && key < T && row < T; });\n",
        "the dQ kernel's causal mask lets each row see the next key (on the tiles that need a mask)"),
    Mutation(
        "attention-dkv-mask-skips-diagonal", "tail", "llmc/cuda/attention.cuh",
        "[T](int key, int query) { return query >= key && query < T && key < T; }",
        "[T](int key, int query) { return query > key && query < T && key < T; }",
        "dK/dV kernel's causal mask drops the diagonal (each key's own query)"),
    # ---- vector / scalar path selection ------------------------------------------------------------------------
    Mutation(
        "vector-path-any-size", "vector", "llmc/cuda/common.cuh",
        "    return n % width == 0 && (aligned16(ptrs) && ...);\n",
        "    return (aligned16(ptrs) && ...);\n",
        "the vector path is chosen for sizes that are not a multiple of the pack width"),
    Mutation(
        "vector-path-ignores-alignment", "vector", "llmc/cuda/common.cuh",
        "    return n % width == 0 && (aligned16(ptrs) && ...);\n",
        "    return n % width == 0;\n",
        "the vector path is chosen for pointers that are not 16-byte aligned"),
    # ---- numerics ----------------------------------------------------------------------------------------------
    Mutation(
        "layernorm-no-epsilon", "numerics", "llmc/cuda/layernorm.cuh",
        "    const float r = rsqrtf(warp_sum(v) / (float)C + kLayerNormEps);\n",
        "    const float r = rsqrtf(warp_sum(v) / (float)C);\n",
        "layernorm without epsilon: constant rows give inf"),
    Mutation(
        "matmul-bias-partials-bf16-accumulation", "numerics", "llmc/cuda/matmul.cuh",
        "    sum_rows(acc, r1 - r0, [&](size_t r) { return col + (r0 + r) * OC; });\n",
        "    for (size_t r = r0; r < r1; r++) {\n"
        "        float v[W];\n"
        "        load_floats(v, col + r * OC);\n"
        "LLMC_UNROLL\n"
        "        for (int e = 0; e < W; e++) acc[e] = to_float(to_bf16(acc[e] + v[e]));\n"
        "    }\n",
        "the bias gradient's row-block partial sums accumulate in bf16"),
    Mutation(
        "reduce-column-sums-bf16-accumulation", "numerics", "llmc/cuda/reduce.cuh",
        "            for (size_t w = 0; w < WARPS; w++) s[e] += warp_sums[w][lane * W + e];\n",
        "            for (size_t w = 0; w < WARPS; w++) s[e] = to_float(to_bf16(s[e] + warp_sums[w][lane * W + e]));\n",
        "column sums add the warps' partials in bf16"),
    Mutation(
        "adamw-ignores-seed-offset", "numerics", "llmc/cuda/adamw.cuh",
        "hash_index(seed, seed_offset + i + e)",
        "hash_index(seed, i + e)",
        "AdamW's stochastic rounding ignores the shard's offset in its tensor"),
    Mutation(
        "gelu-backward-wrong-derivative", "numerics", "llmc/cuda/gelu.cuh",
        "    float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);\n",
        "    float du = kGeluScale * (1.0f + 0.044715f * x * x);\n",
        "GELU's derivative misses the factor 3 of the cubic term"),
    Mutation(
        "classifier-online-max-no-rescale", "numerics", "llmc/cuda/classifier.cuh",
        "        if (pm > m) {\n            s *= expf(m - pm);\n            m = pm;\n        }\n",
        "        if (pm > m) m = pm;\n",
        "the classifier's online softmax does not rescale its running sum when the maximum grows"),
    Mutation(
        "attention-online-softmax-no-rescale", "numerics", "llmc/cuda/attention.cuh",
        "                LLMC_UNROLL\n"
        "                for (int nt = 0; nt < NTD; nt++) o[mt][nt][2 * hh] *= alpha, o[mt][nt][2 * hh + 1] *= alpha;\n",
        "",
        "flash forward does not rescale the output accumulator when a later key tile raises the row maximum"),
    Mutation(
        "attention-lse-missing-max", "numerics", "llmc/cuda/attention.cuh",
        "lse[(size_t)bh * T + row] = m[mt][hh] + log2f(sum);",
        "lse[(size_t)bh * T + row] = log2f(sum);",
        "the saved log-sum-exp leaves out the running maximum, so the backward's recomputed P is off"),
    Mutation(
        "attention-dkv-b-fragments-in-load-order", "numerics", "llmc/cuda/attention.cuh",
        "const uint32_t b0[2] = {r[0], r[2]}, b1[2] = {r[1], r[3]};",
        "const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};",
        "dK/dV kernel: the B fragments of a load at the lane offset (ldmatrix_lane_offset) taken in load order, as "
        "if the lanes had addressed them in warp_mma_abt's pattern"),
    Mutation(
        "mma-pack-bf16x2-swapped", "numerics", "llmc/cuda/mma.cuh",
        "    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);\n",
        "    const __nv_bfloat162 v = __floats2bfloat162_rn(hi, lo);\n",
        "P / dS fragments packed with the two columns swapped (the wrong half of the register)"),
    # ---- cuBLASLt alignment and fallbacks ----------------------------------------------------------------------
    Mutation(
        "gemm-no-epilogue-alignment-check", "cublaslt", "llmc/cuda/matmul.cuh",
        "        if ((g.bias && (uintptr_t)g.bias % 16 != 0) || (g.aux && (uintptr_t)g.aux % 16 != 0))\n"
        "            return declined(g, \"its bias or aux pointer is not 16-byte aligned\");\n",
        "",
        "a misaligned bias or pre-GELU buffer goes to the fused epilogue (a device fault) instead of the fallback"),
    Mutation(
        "gemm-declares-256-byte-alignment", "cublaslt", "llmc/cuda/matmul.cuh",
        "        unsigned al = 256;\n        while (al > 1 && a % al != 0) al >>= 1;\n        return al;\n",
        "        (void)a;\n        return 256;\n",
        "the GEMM runner declares every pointer 256-byte aligned, whatever its offset"),
    Mutation(
        "gemm-fallback-drops-bias", "cublaslt", "llmc/cuda/matmul.cuh",
        "    return bias ? add_bias(out, bias, N, OC, stream) : true;\n",
        "    return true;\n",
        "the unfused fallback (taken for a misaligned bias) forgets to add the bias"),
    # ---- device limits (dev/cudasim device profiles, launch-bounded shared memory) ----------------------------
    Mutation(
        "attention-forward-smem-too-small", "limits", "llmc/cuda/attention.cuh",
        "    LLMC_LAUNCH((attention_forward_kernel<HS, BC, STAGES>), grid_size(grid, 1), Tiles::kFwdWarps * 32, smem, st, out,\n",
        "    LLMC_LAUNCH((attention_forward_kernel<HS, BC, STAGES>), grid_size(grid, 1), Tiles::kFwdWarps * 32, smem - 4096, st, out,\n",
        "the forward attention's launch asks for 4 KiB less dynamic shared memory than its tiles use"),
    Mutation(
        "layernorm-backward-smem-too-small", "limits", "llmc/cuda/layernorm.cuh",
        "    LLMC_LAUNCH(kernel, (unsigned)G, 32 * warps, smem, stream, dinp, partials, dout, inp, w, mean, rstd, N, C,\n",
        "    LLMC_LAUNCH(kernel, (unsigned)G, 32 * warps, smem - 4 * C, stream, dinp, partials, dout, inp, w, mean, rstd, N, C,\n",
        "the layernorm backward's launch is half a warp slice short of the shared memory its warps use"),
    Mutation(
        "attention-stride-beyond-sm86-limit", "limits", "llmc/cuda/attention.cuh",
        "    static constexpr int kStride = HS + 8;  // shared-memory row stride in elements (16 bytes of padding)\n",
        "    static constexpr int kStride = HS + 136;  // shared-memory row stride in elements (16 bytes of padding)\n",
        "wider padding (still correct arithmetic) puts head size 64's tiles above the 99 KiB an sm_86/89 block can have"),
    Mutation(
        "gemm-gelu-fallback-skips-gelu", "cublaslt", "llmc/cuda/matmul.cuh",
        "    return gelu_forward(out, pre_gelu, N * OC, stream) && vec_bias;\n",
        "    return vec_bias;\n",
        "the GELU fallback (OC not a multiple of 8, or a misaligned aux buffer) leaves out the GELU"),
    # ---- reduction orders (dev/cudasim/nccl.cpp) ------------------------------------------------------------------
    Mutation(
        "nccl-all-reduce-rank-order", "order", "dev/cudasim/nccl.cpp",
        "                if (lo < count) out.push_back({lo, std::min(count, lo + real), (c + 1) % n});\n",
        "                if (lo < count) out.push_back({lo, std::min(count, lo + real), 0});\n",
        "the simulated all-reduce sums every chunk in rank order, as no ring does: order-dependent assertions pass"),
    Mutation(
        "nccl-bf16-rounded-once", "order", "dev/cudasim/nccl.cpp",
        "    static Acc round(Acc v) { return __bfloat162float(__float2bfloat16_rn(v)); }\n",
        "    static Acc round(Acc v) { return v; }\n",
        "the simulated NCCL sums bf16 in fp32 and rounds once, where NCCL's kernels round at every hop"),
    # ---- inline PTX text (llmc/cuda/mma.cuh; the simulator executes the string) ----------------------------------
    Mutation(
        "mma-ldmatrix-trans-dropped", "ptx", "llmc/cuda/mma.cuh",
        '#define LLMC_PTX_LDMATRIX_X4_TRANS "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\\n"\n',
        '#define LLMC_PTX_LDMATRIX_X4_TRANS "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n"\n',
        "the transposed matrix load loses its .trans qualifier (the V tile's B fragments come out untransposed)"),
    Mutation(
        "mma-b-operands-swapped", "ptx", "llmc/cuda/mma.cuh",
        '    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\\n"\n',
        '    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%9,%8}, {%10,%11,%12,%13};\\n"\n',
        "the mma instruction text names the two B registers in the wrong order"),
    Mutation(
        "ptx-nvcc-constant-as-register", "nvcc", "llmc/cuda/platform.cuh",
        '#define LLMC_CONST(x) "n"(x)\n',
        '#define LLMC_CONST(x) "r"(x)\n',
        "nvcc's operand kind for a compile-time constant passes a register: cp.async.wait_group's count must be an "
        "immediate"),
    Mutation(
        "cp-async-wait-all-groups-pending", "ptx", "llmc/cuda/mma.cuh",
        '#define LLMC_PTX_CP_ASYNC_WAIT "cp.async.wait_group %0;\\n"\n',
        '#define LLMC_PTX_CP_ASYNC_WAIT "cp.async.wait_group 1;\\n"\n',
        "the wait's text names a constant 1 instead of its operand: wait_group 0 leaves the newest copies pending"),
    # ---- loops at production sizes (caught under CUDASIM_GRID_CAP) ----------------------------------------------
    Mutation(
        "layernorm-backward-second-row-skipped", "loop", "llmc/cuda/layernorm.cuh",
        "    for (size_t row = row_begin + warp; row < row_end; row += num_warps) {\n",
        "    for (size_t row = row_begin + warp; row < row_end; row += num_warps + 1) {\n",
        "a warp's second row of a layernorm backward block is the wrong one (blocks of more rows than warps)"),
    Mutation(
        "reduce-grid-stride-skips", "loop", "llmc/cuda/reduce.cuh",
        "    for (; i < packs; i += stride) {\n",
        "    for (; i < packs; i += stride + 1) {\n",
        "the reduction's grid-stride remainder loop steps one pack too far after its first iteration"),
    # ---- state cached across calls (llmc/cuda/matmul.cuh's plan cache) ------------------------------------------
    Mutation(
        "gemm-plan-keeps-first-bias", "cache", "llmc/cuda/matmul.cuh",
        "        if (g.bias) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,\n",
        "        static std::map<const void*, int> bias_set;\n"
        "        if (g.bias && bias_set[p.desc]++ == 0) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,\n",
        "a cached GEMM plan keeps the bias pointer of its first caller (the next layer adds the first layer's bias)"),
    Mutation(
        "gemm-dgelu-fallback-skips-gelu-backward", "cublaslt", "llmc/cuda/matmul.cuh",
        "    return dinp_pre_gelu ? gelu_backward_inplace(dinp, dinp_pre_gelu, N * C, stream) : true;\n",
        "    return true;\n",
        "the DGELU fallback (C not a multiple of 8) leaves dinp as the gradient of gelu(pre) instead of pre"),
    Mutation(
        "gemm-tuning-no-restore", "cublaslt", "llmc/cuda/matmul.cuh",
        "            CUDA_CHECK(cudaMemcpyAsync(g.d, saved, bytes, cudaMemcpyDeviceToDevice, stream));\n",
        "",
        "timing an accumulating GEMM (dweight +=) leaves the timing runs' sums in the gradient"),
    Mutation(
        "bias-backward-drops-last-row", "cublaslt", "llmc/cuda/matmul.cuh",
        "    const size_t r0 = g * rows_per_block, r1 = r0 + rows_per_block < N ? r0 + rows_per_block : N;\n",
        "    const size_t r0 = g * rows_per_block, r1 = r0 + rows_per_block < N ? r0 + rows_per_block : N - 1;\n",
        "the bias gradient's column sums (the fallback of a declined BGRADB, or --bias-grad-epilogue 0) leave out the "
        "last row"),
    Mutation(
        "add-bias-pack-reversed", "cublaslt", "llmc/cuda/matmul.cuh",
        "    for (int e = 0; e < W; e++) o[e] += b[e];\n",
        "    for (int e = 0; e < W; e++) o[e] += b[W - 1 - e];\n",
        "the fallback bias add (a declined BIAS epilogue) adds a vector pack's biases in reverse column order"),
    Mutation(
        "gemm-bgradb-overwrites-dbias", "cublaslt", "llmc/cuda/matmul.cuh",
        "        gw.bias = bias_scratch;\n",
        "        gw.bias = dbias;\n",
        "BGRADB writes the bias gradient straight into dbias, overwriting the accumulated gradient"),
    # ---- the speedrun recipe's kernels (llmc/cuda/speedrun_ops.h; tests: sim_speedrun_kernels*, sim_newton_schulz) --
    Mutation(
        "rmsnorm-mean-without-c", "numerics", "llmc/cuda/rmsnorm.cuh",
        "    const float r = rsqrtf(warp_sum(ss) / (float)C + kRmsNormEps);\n",
        "    const float r = rsqrtf(warp_sum(ss) + kRmsNormEps);\n",
        "RMSNorm divides by the root of the sum of squares, not of their mean"),
    Mutation(
        "rmsnorm-backward-adds-to-dout", "numerics", "llmc/cuda/rmsnorm.cuh",
        "        float d[W];\n        load_floats(d, dx + j * W);\n",
        "        float d[W];\n        load_floats(d, dout + row * C + j * W);\n",
        "the RMSNorm backward adds its gradient to dout's values, not to dinp's (the residual stream's gradient is "
        "lost)"),
    Mutation(
        "rmsnorm-backward-xhat-unscaled", "numerics", "llmc/cuda/rmsnorm.cuh",
        "        for (int e = 0; e < W; e++) d[e] += r * (to_float(g[e]) - to_float(xp[e]) * r * proj);\n",
        "        for (int e = 0; e < W; e++) d[e] += r * (to_float(g[e]) - to_float(xp[e]) * proj);\n",
        "the RMSNorm backward projects with x instead of x rstd"),
    Mutation(
        "rmsnorm-forward-row-past-end", "bounds", "llmc/cuda/rmsnorm.cuh",
        "    if (row >= N) return;  // whole warps leave together\n    RowSlice<bf16, W, P> x(inp + row * C",
        "    if (row > N) return;  // whole warps leave together\n    RowSlice<bf16, W, P> x(inp + row * C",
        "the RMSNorm forward's warps past the last row read and write one row beyond the buffers"),
    Mutation(
        "rmsnorm-vector-any-width", "vector", "llmc/cuda/rmsnorm.cuh",
        "    const bool vec = vector_ok(C, kPackBf16, out, inp);\n",
        "    const bool vec = vector_ok(kPackBf16, kPackBf16, out, inp);\n",
        "the RMSNorm forward takes the 16-byte path for any row length"),
    Mutation(
        "rmsnorm-sum-over-registers-only", "tail", "llmc/cuda/rmsnorm.cuh",
        "    x.for_each([&](int, unsigned, const Pack<bf16, W>& p) {\nLLMC_UNROLL\n"
        "        for (int e = 0; e < W; e++) ss += to_float(p[e]) * to_float(p[e]);\n",
        "    x.for_each([&](int k, unsigned, const Pack<bf16, W>& p) {\nLLMC_UNROLL\n"
        "        for (int e = 0; e < W; e++) ss += k < P ? to_float(p[e]) * to_float(p[e]) : 0.0f;\n",
        "the RMSNorm's sum of squares leaves out the packs beyond the registers (rows longer than 32 P W elements)"),
    Mutation(
        "fused-residual-normalises-inp1", "numerics", "llmc/cuda/common.cuh",
        "        r.store(residual + j * W);\n        x.set(k, r);\n",
        "        r.store(residual + j * W);\n        x.set(k, pa);\n",
        "the fused residual norms (layernorm and RMSNorm) keep inp1's packs in registers instead of the residual's, "
        "and normalise those"),
    Mutation(
        "fused-residual-in-registers-only", "tail", "llmc/cuda/common.cuh",
        "        r.store(residual + j * W);\n",
        "        if (k < P) r.store(residual + j * W);\n",
        "the fused residual norms store only the residual packs they keep in registers: a longer row's rest is never "
        "written, and the norm re-reads what was there"),
    Mutation(
        "fused-rmsnorm-row-past-end", "bounds", "llmc/cuda/rmsnorm.cuh",
        "    if (row >= N) return;\n    auto x = residual_sum_row",
        "    if (row > N) return;\n    auto x = residual_sum_row",
        "the fused residual RMSNorm's warps past the last row read and write one row beyond the buffers"),
    Mutation(
        "fused-rmsnorm-vector-any-width", "vector", "llmc/cuda/rmsnorm.cuh",
        "    const bool vec = vector_ok(C, kPackBf16, residual, out, inp1, inp2);\n",
        "    const bool vec = vector_ok(kPackBf16, kPackBf16, residual, out, inp1, inp2);\n",
        "the fused residual RMSNorm takes the 16-byte path for any row length"),
    Mutation(
        "fused-rmsnorm-vector-ignores-inp2", "vector", "llmc/cuda/rmsnorm.cuh",
        "    const bool vec = vector_ok(C, kPackBf16, residual, out, inp1, inp2);\n",
        "    const bool vec = vector_ok(C, kPackBf16, residual, out, inp1);\n",
        "the fused residual RMSNorm's path choice does not look at inp2's alignment"),
    Mutation(
        "muon-workspace-never-regrown", "bounds", "llmc/cuda/cuda_backend.cu",
        "    void* workspace = scratch(muon_workspace_, speedrun::muon_workspace_bytes(rows, cols));\n",
        "    void* workspace =\n"
        "        muon_workspace_.ptr ? muon_workspace_.ptr\n"
        "                            : scratch(muon_workspace_, speedrun::muon_workspace_bytes(rows, cols));\n",
        "the backend's Muon workspace keeps the size of the first matrix: a larger one overruns it"),
    Mutation(
        "qk-rotary-no-barrier", "shared", "llmc/cuda/qk_rotary.cuh",
        "        partial[j] = s;\n    }\n    __syncthreads();\n    for (unsigned j = threadIdx.x; j < pairs; j += blockDim.x) {\n        bf16* x",
        "        partial[j] = s;\n    }\n    for (unsigned j = threadIdx.x; j < pairs; j += blockDim.x) {\n        bf16* x",
        "the QK-norm forward sums a head's partials before the other threads of the head have written theirs"),
    Mutation(
        "qk-rotary-sin-sign", "numerics", "llmc/cuda/qk_rotary.cuh",
        "            y2[e] = n2 * c[e] - n1 * s[e];\n",
        "            y2[e] = n2 * c[e] + n1 * s[e];\n",
        "the rotary forward's second half turns the other way (not a rotation)"),
    Mutation(
        "qk-rotary-backward-output-not-turned", "numerics", "llmc/cuda/qk_rotary.cuh",
        "        n1[e] = to_float(y1[e]) * c[e] - to_float(y2[e]) * s[e];\n",
        "        n1[e] = to_float(y1[e]);\n",
        "the QK-norm backward projects on the rotated output instead of the normalised input R^T y"),
    Mutation(
        "qk-rotary-rstd-slot", "bounds", "llmc/cuda/qk_rotary.cuh",
        "        if (j % g.per_head == 0) rstd[(size_t)blockIdx.x * 2 * NH + g.head(j)] = r;\n",
        "        if (j % g.per_head == 0) rstd[(size_t)blockIdx.x * NH + g.head(j)] = r;\n",
        "the forward saves each position's rstd with the stride of NH heads instead of 2 NH (q and k)"),
    Mutation(
        "qk-rotary-second-pair-pack-skipped", "loop", "llmc/cuda/qk_rotary.cuh",
        "    for (unsigned j = threadIdx.x; j < pairs; j += blockDim.x) {\n        const size_t o = base + g.offset(j, W);\n        const bool first",
        "    for (unsigned j = threadIdx.x; j < pairs; j += 2 * blockDim.x) {\n        const size_t o = base + g.offset(j, W);\n        const bool first",
        "the backward's threads skip their second pair pack (positions with more pair packs than threads)"),
    Mutation(
        "qk-rotary-vector-half-head", "vector", "llmc/cuda/qk_rotary.cuh",
        "    L.vector = (C / NH) % (2 * kPackBf16) == 0 && aligned16(a)",
        "    L.vector = (C / NH) % kPackBf16 == 0 && aligned16(a)",
        "the QK-norm takes the 16-byte path when the head size is a multiple of 8, so the second half's packs start "
        "mid-pack"),
    Mutation(
        "relu2-backward-no-factor-2", "numerics", "llmc/cuda/relu2.cuh",
        "float grad(float x) { return 2.0f * fmaxf(x, 0.0f); }",
        "float grad(float x) { return fmaxf(x, 0.0f); }",
        "the ReLU^2 backward forgets the factor 2 of its derivative"),
    Mutation(
        "activation-backward-off-by-one", "bounds", "llmc/cuda/activation.cuh",
        "    if (i >= n) return;\n    float d[W], x[W];\n",
        "    if (i > n) return;\n    float d[W], x[W];\n",
        "the in-place activation backward (GELU, ReLU^2) reads and writes one pack past the end"),
    Mutation(
        "softcap-no-slope", "numerics", "llmc/cuda/classifier.cuh",
        "            if (col < num_real) g = dloss * (expf(c - m) * inv - (col == tgt ? 1.0f : 0.0f)) * logits.slope(c);\n",
        "            if (col < num_real) g = dloss * (expf(c - m) * inv - (col == tgt ? 1.0f : 0.0f));\n",
        "the soft-capped classifier's gradient is taken with respect to the capped logits, not the logits"),
    Mutation(
        "softcap-target-not-capped", "numerics", "llmc/cuda/classifier.cuh",
        "    const float x_target = threadIdx.x == 0 && valid ? lg(to_float(x[target])) : 0.0f;\n",
        "    const float x_target = threadIdx.x == 0 && valid ? to_float(x[target]) : 0.0f;\n",
        "the one-block-per-row kernel's loss uses the uncapped target logit"),
    Mutation(
        "softcap-prefetch-next-target-not-capped", "loop", "llmc/cuda/classifier.cuh",
        "            x_target = lg(to_float(logits[next * Vp + target_next]));\n",
        "            x_target = to_float(logits[next * Vp + target_next]);\n",
        "the persistent kernel reads the uncapped target logit for a block's second and later rows"),
    Mutation(
        "softcap-uncapped-argument", "numerics", "llmc/cuda/softcap_classifier.cuh",
        "    __device__ __forceinline__ float operator()(float z) const { return cap * tanhf(z * inv_cap); }\n",
        "    __device__ __forceinline__ float operator()(float z) const { return cap * tanhf(z); }\n",
        "the soft-cap takes tanh of the logit instead of the logit over the cap"),
    Mutation(
        "newton-schulz-b-c-swapped", "numerics", "llmc/cuda/newton_schulz.cuh",
        "kNewtonSchulzC, kNewtonSchulzB, stream);  // B = c A A + b A",
        "kNewtonSchulzB, kNewtonSchulzC, stream);  // B = c A A + b A",
        "the quintic's b and c coefficients swapped in the B = c A A + b A GEMM"),
    Mutation(
        "newton-schulz-next-not-seeded", "stream", "llmc/cuda/newton_schulz.cuh",
        "    CUDA_CHECK(cudaMemcpyAsync(y, x, rows * cols * sizeof(bf16), cudaMemcpyDeviceToDevice, stream));\n",
        "",
        "the next iterate's a X term (the GEMM's beta) reads whatever its buffer held, not a copy of X"),
    Mutation(
        "newton-schulz-tall-gram-transposed", "numerics", "llmc/cuda/newton_schulz.cuh",
        "        gemm_row_major(gemm, a, x, true, x, false, m, m, n, 1.0f, 0.0f, stream);  // A = X^T X\n",
        "        gemm_row_major(gemm, a, x, false, x, true, m, m, n, 1.0f, 0.0f, stream);  // A = X^T X\n",
        "a tall matrix's Gram matrix is taken as if it were wide (its rows read as m x n)"),
    Mutation(
        "newton-schulz-norm-accumulates", "stream", "llmc/cuda/newton_schulz.cuh",
        "    CUDA_CHECK(cudaMemsetAsync(sumsq, 0, sizeof(float), stream));\n",
        "",
        "the squared norm is added to the previous call's instead of starting from 0"),
    Mutation(
        "newton-schulz-no-sqrt", "numerics", "llmc/cuda/newton_schulz.cuh",
        "    const float inv = 1.0f / (sqrtf(*sumsq) + kNewtonSchulzEps);\n",
        "    const float inv = 1.0f / (*sumsq + kNewtonSchulzEps);\n",
        "the normalisation divides by the squared Frobenius norm"),
    Mutation(
        "muon-nesterov-ignored", "numerics", "llmc/cuda/muon.cuh",
        "        u[e] = nesterov ? g[e] + mu * b[e] : b[e];\n",
        "        u[e] = b[e];\n",
        "Muon orthogonalises the momentum buffer, not the Nesterov update g + mu buf"),
    Mutation(
        "muon-apply-ignores-seed-offset", "numerics", "llmc/cuda/muon.cuh",
        "        p[e] = stochastic_round_bf16(w[e], hash_index(seed, seed_offset + i + e));\n",
        "        p[e] = stochastic_round_bf16(w[e], hash_index(seed, i + e));\n",
        "Muon's stochastic rounding ignores the matrix's offset: q, k and v blocks of a layer round alike"),
    # ---- the scalar mixes (llmc/cuda/scalar_mix.cuh; tests: sim_speedrun_kernels*) ------------------------------
    Mutation(
        "embed-skip-dx0-from-written-dx", "numerics", "llmc/cuda/scalar_mix.cuh",
        "            d0[e] += b * g[e];\n            g[e] *= a;\n",
        "            g[e] *= a;\n            d0[e] += b * g[e];\n",
        "the embedding skip's backward takes dx0 from dx = l0 dout, as if dout were read after dx was written in "
        "place"),
    Mutation(
        "embed-skip-dl1-from-dl0-partials", "bounds", "llmc/cuda/scalar_mix.cuh",
        "stream, dl1, (const float*)partials + blocks, blocks, 1.0f);",
        "stream, dl1, (const float*)partials, blocks, 1.0f);",
        "the embedding skip's second scalar gradient adds the first one's partial sums (sum(dout x), not x0)"),
    Mutation(
        "embed-skip-second-sum-not-block-reduced", "numerics", "llmc/cuda/scalar_mix.cuh",
        "    s1 = block_sum(s1, scratch);\n",
        "",
        "the embedding skip's block partial of sum(dout x0) is thread 0's own sum, not the block's"),
    Mutation(
        "embed-skip-forward-past-end", "bounds", "llmc/cuda/scalar_mix.cuh",
        "    if (i >= n) return;\n    const float a = to_float(*l0), b = to_float(*l1);\n",
        "    if (i > n) return;\n    const float a = to_float(*l0), b = to_float(*l1);\n",
        "the embedding skip's forward reads and writes one pack past the end"),
    Mutation(
        "embed-skip-vector-ignores-dx0", "vector", "llmc/cuda/scalar_mix.cuh",
        "    const bool vec = vector_ok(n, kPackBf16, dx, dx0, dout, x, x0);\n",
        "    const bool vec = vector_ok(n, kPackBf16, dx, dout, x, x0);\n",
        "the embedding skip's backward takes the 16-byte path whatever dx0's alignment"),
    Mutation(
        "embed-skip-backward-skips-packs", "loop", "llmc/cuda/scalar_mix.cuh",
        "p < packs; p += stride) {\n        const size_t i = p * W;\n        float g[W], u[W], v[W], d0[W];\n",
        "p < packs; p += 2 * stride) {\n        const size_t i = p * W;\n        float g[W], u[W], v[W], d0[W];\n",
        "the embedding skip's backward threads skip every other pass of the grid-stride loop (production sizes)"),
    Mutation(
        "scalar-mix-cap-ignores-sums", "bounds", "llmc/cuda/scalar_mix.cuh",
        "    const size_t cap = loop_blocks_cap(kMaxReducePartials / sums);\n",
        "    const size_t cap = loop_blocks_cap(kMaxReducePartials);\n",
        "the backward's grid is capped at 1024 blocks whatever the number of sums: past 512 blocks the embedding "
        "skip's second row of partial sums runs past the 1024-float buffer"),
    Mutation(
        "value-residual-row-offset", "bounds", "llmc/cuda/scalar_mix.cuh",
        "return i + 2 * C * (i / C + 1); }",
        "return i + 2 * C; }",
        "the value residual addresses every row's v at the first row's offset 2C: rows of 3C read as rows of C"),
    Mutation(
        "value-residual-vector-by-count", "vector", "llmc/cuda/scalar_mix.cuh",
        "    return launch_elementwise(vector_ok(C, kPackBf16, qkv, v_pre, qkv1),",
        "    return launch_elementwise(vector_ok(N * C, kPackBf16, qkv, v_pre, qkv1),",
        "the value residual's forward takes the 16-byte path when N C is a multiple of 8: packs straddle rows of v"),
    Mutation(
        "value-residual-backward-dv-unscaled", "numerics", "llmc/cuda/scalar_mix.cuh",
        "            dv[e] *= 1.0f - l;\n",
        "",
        "the value residual's backward leaves dv as it came: the (1 - lam) factor of the mixed v is lost"),
    Mutation(
        "value-residual-dlam-sign", "numerics", "llmc/cuda/scalar_mix.cuh",
        "            s += dv[e] * (v1[e] - v0[e]);\n",
        "            s += dv[e] * (v0[e] - v1[e]);\n",
        "the value residual's scalar gradient is sum(dv (v_pre - v1)): the sign of d v / d lam flipped"),
    Mutation(
        "value-residual-final-drops-block", "tail", "llmc/cuda/scalar_mix.cuh",
        "stream, dlam, (const float*)partials, blocks, 1.0f);",
        "stream, dlam, (const float*)partials, blocks - 1, 1.0f);",
        "the value residual's scalar gradient leaves out the last block's partial sum"),
    Mutation(
        "value-residual-add-dv1-at-qkv-index", "bounds", "llmc/cuda/scalar_mix.cuh",
        "    load_floats(a, dv1 + i);\n",
        "    load_floats(a, dv1 + j);\n",
        "value_residual_add reads dv1 (N x C) at qkv's index (rows of 3C): wrong elements, then past its end"),
]

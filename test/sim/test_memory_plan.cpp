// The --dry-run memory plan (llmc/memory_plan.h) is exact: for the CUDA backend under the simulator, the device
// memory in use after creating the backend, the model, the strategy and the trainer's loss accumulator and running
// one training step (which grows every scratch buffer to its steady size) equals the plan's total to the byte, for
// each recompute level and ZeRO stage, and with the classifier in chunks. The simulated cudaMemGetInfo counts
// exactly the bytes cudaMalloc was asked for.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "llmc/comm.h"
#include "llmc/config.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/cuda_comm.h"
#include "llmc/error.h"
#include "llmc/memory_plan.h"
#include "llmc/models.h"
#include "llmc/parallel.h"
#include "llmc/trainer_setup.h"
#include "test/fixtures/testing.h"

using llmc::CudaBackend;

namespace {

size_t device_bytes_in_use() {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return total_b - free_b;
}

void check_plan(const std::string& descriptor, int batch, int seq_len, int recompute, int zero_stage,
                int classifier_chunk = 4096) {
    llmc::TrainOptions o;
    o.model = descriptor, o.batch_size = batch, o.seq_len = seq_len, o.recompute = recompute;
    o.zero_stage = zero_stage, o.classifier_chunk = classifier_chunk;
    llmc::ModelConfig cfg;
    if (!llmc::parse_model_descriptor(descriptor, &cfg)) llmc::fail("bad descriptor %s", descriptor.c_str());
    llmc::BackendOptions bo;
    auto comm = llmc::make_single_comm();
    llmc::DpGroups groups = llmc::make_dp_groups(*comm, "", zero_stage);
    const llmc::ParallelPlan pp = llmc::make_parallel_plan(llmc::parallel_options_for(o), groups.mesh);
    const llmc::MemoryPlan plan = llmc::plan_training_memory<CudaBackend>(
        pp, cfg, (size_t)batch, (size_t)seq_len, llmc::model_options_for(o, pp), recompute, bo);

    const size_t before = device_bytes_in_use();
    size_t used = 0;
    {  // what the trainer builds from the same plan, and one step of it
        CudaBackend be(bo);
        std::unique_ptr<llmc::Model<CudaBackend>> model =
            llmc::create_model(be, cfg, (size_t)batch, (size_t)seq_len, llmc::model_options_for(o, pp));
        model->init(7);
        std::unique_ptr<llmc::DataParallel<CudaBackend>> dp =
            llmc::make_data_parallel(pp, std::move(groups), be, *model, *comm, llmc::OptimConfig(), 7);
        float* loss_acc = (float*)be.alloc(sizeof(float));  // the trainer's (llmc/trainer.h)
        std::vector<int> tokens((size_t)batch * seq_len);
        for (size_t i = 0; i < tokens.size(); i++) tokens[i] = (int)((i * 7 + 3) % cfg.vocab_size);
        model->forward(tokens.data(), tokens.data(), (size_t)batch, (size_t)seq_len, 1.0f);
        model->accumulate_loss(loss_acc, 1.0f);
        model->backward(dp->grad_sink(true));
        dp->end_micro_step(true);
        dp->grad_norm();
        dp->apply(1e-3f, 1);
        be.synchronize();
        used = device_bytes_in_use() - before;
        be.free(loss_acc);
    }
    testing::check("memory plan " + descriptor + " B=" + std::to_string(batch) + " T=" + std::to_string(seq_len) +
                       " -r " + std::to_string(recompute) + " -z " + std::to_string(zero_stage) +
                       " --classifier-chunk " + std::to_string(classifier_chunk) +
                       ": the plan's total is what one training step allocates",
                   used == plan.total(), "allocated %zu bytes, the plan says %zu", used, plan.total());
}

}  // namespace

int main() {
    try {
        check_plan("L=2,NH=2,C=64,T=32,V=100", 2, 24, 0, 0);
        check_plan("L=2,NH=2,C=64,T=32,V=100", 2, 24, 1, 1);
        check_plan("L=3,NH=1,C=32,T=16,V=60", 3, 16, 2, 2);
        // The classifier in chunks of 29 rows (48 = 29 + 19): one chunk of logits, the plan still exact.
        check_plan("L=2,NH=2,C=64,T=32,V=100", 2, 24, 0, 0, 29);
    } catch (const llmc::Error& e) {
        testing::fail("memory plan", "%s", e.what());
    }
    return testing::finish();
}

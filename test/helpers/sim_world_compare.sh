# sim_world_compare RUN_A RUN_B LAYERS SEQUENCES PARAM_ATOL: compare_runs.py on two runs of the simulated CUDA
# trainer that differ in world size or sharding only, at the tolerances derived in test/e2e/train_sim_world_test.sh:
# at the initial parameters, the losses 2 (n + 1) u (n = SEQUENCES per step, u = 2^-24) and the grad norm 1e-5;
# later, the losses s / 4 and the grad norms 4 sqrt(2) s (s = 2^-8 sqrt(6 LAYERS + 4)); parameters PARAM_ATOL
# (2 x lr x steps).
sim_world_compare() {
    local first later_loss later_norm
    read -r first later_loss later_norm < <(/usr/bin/python3 -c "import math; s = 2**-8 * math.sqrt(6 * $3 + 4)
print(2 * ($4 + 1) * 2**-24, s / 4, 4 * math.sqrt(2) * s)")
    /usr/bin/python3 test/helpers/compare_runs.py "$1" "$2" "$later_loss" "$5" "$later_norm" --first-rtol "$first" 1e-5
}

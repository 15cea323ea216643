#!/usr/bin/env bash
# GPT-2 124M reproduction: see scripts/run_gpt2.sh for the hyper-parameters and the environment variables.
exec "$(dirname "$0")/run_gpt2.sh" 124M "$@"

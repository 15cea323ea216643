# Sourced: quote_command WORD...  prints the words as one shell command line that can be pasted back into a shell:
# a word with anything but letters, digits and . / _ - = , : + @ % (a glob such as data/fineweb10B/*train*.bin, a
# space) is single-quoted. PRINT_ONLY=1 of the run scripts prints through this.
quote_command() {
    local out=() w
    for w in "$@"; do
        if [[ "$w" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then out+=("$w"); else out+=("'${w//\'/\'\\\'\'}'"); fi
    done
    echo "${out[*]}"
}

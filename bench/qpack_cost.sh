#!/bin/sh
# Instructions per QPACK field section, ours beside libnghttp3's (issue 29), counted by callgrind
# on build/qpack-cost: for each mode, (instructions of N sections - of none) / N.
#   bench/qpack_cost.sh [N]     (default 2000)
set -eu
cd "$(dirname "$0")/.."
make -s build/qpack-cost
n=${1:-2000}
ir() { # instructions of `qpack-cost MODE COUNT`
    valgrind --tool=callgrind --callgrind-out-file=/dev/null build/qpack-cost "$1" "$2" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for mode in dec-cold-ours dec-cold-ng dec-nghttp3-ours dec-nghttp3-ng dec-warm-ours dec-warm-ng \
    enc-ours enc-ng enc-ng-dyn; do
    base=$(ir "$mode" 0)
    all=$(ir "$mode" "$n")
    echo "$mode: $(( (all - base) / n )) instructions a section"
done
build/qpack-cost dec-warm-ours 1

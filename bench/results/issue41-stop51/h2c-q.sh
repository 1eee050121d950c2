#!/bin/bash
# usage: h2c-q.sh BIN ENGINE PORT N PATH [server args]  -- server in a 40% quota cgroup
bin=$1 eng=$2 port=$3 n=$4 path=$5; shift 5
cg=/sys/fs/cgroup/cpu/q41; mkdir -p $cg; echo 100000 > $cg/cpu.cfs_period_us; echo 40000 > $cg/cpu.cfs_quota_us
taskset -c 0 $bin -p $port -b 127.0.0.1 -t 1 --engine $eng --access-log off "$@" /work/m/www >/dev/null 2>&1 &
pid=$!
echo $pid > $cg/cgroup.procs
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:$port/ && break; sleep 0.1; done
taskset -c 1 h2load -n 20000 -c4 -m100 http://127.0.0.1:$port/$path >/dev/null
if [ -n "$COUNTS" ]; then
cat > /tmp/btq.$$ <<BT
tracepoint:io_uring:io_uring_complete /pid == $pid/ { @cqe = count(); @cqres = hist(args->res); }
tracepoint:io_uring:io_uring_submit_req /pid == $pid/ { @sqe[args->opcode] = count(); }
tracepoint:syscalls:sys_exit_recvfrom /pid == $pid/ { @rres = hist(args->ret); }
tracepoint:raw_syscalls:sys_enter /pid == $pid/ { @sys[args->id] = count(); }
BT
bpftrace /tmp/btq.$$ > /tmp/btq.out.$$ 2>&1 &
bp=$!; sleep 3
fi
read u0 s0 < <(awk '{print $14" "$15}' /proc/$pid/stat)
r=$(taskset -c 1 h2load -n $n -c4 -m100 http://127.0.0.1:$port/$path | awk '/^finished/ {print $4}')
read u1 s1 < <(awk '{print $14" "$15}' /proc/$pid/stat)
echo "$eng $r req/s user $((u1-u0)) sys $((s1-s0)) total $((u1-u0+s1-s0)) ticks"
if [ -n "$COUNTS" ]; then kill -INT $bp; wait $bp; awk -v n=$n '/^@/ && NF==2 { printf "%s %.4f/req\n", $1, $2/n; next } {print}' /tmp/btq.out.$$ | grep -v '^$' | grep -v Attaching; fi
kill $pid; wait $pid 2>/dev/null
echo $$ >/dev/null

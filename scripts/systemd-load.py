"""systemd-load.py PORT RESTARTS COMMAND...: 4 clients make one connection per request to
127.0.0.1:PORT while COMMAND (a restart) runs RESTARTS times; exits 1 if any request failed.
Run inside the container of scripts/systemd-container.sh."""
import socket
import subprocess
import sys
import threading
import time

port, restarts, cmd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
stop, ok, errors = threading.Event(), [0] * 4, []


def client(i):
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                got = b""
                while chunk := s.recv(65536):
                    got += chunk
            if got.startswith(b"HTTP/1.1 200"):
                ok[i] += 1
            else:
                errors.append(got[:60])
        except OSError as e:
            errors.append(repr(e))


threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
failed_restarts = 0
for _ in range(restarts):
    time.sleep(0.7)
    failed_restarts += subprocess.run(cmd).returncode != 0
time.sleep(0.7)
stop.set()
for t in threads:
    t.join()
print(f"{sum(ok)} requests answered, {len(errors)} failed, {failed_restarts} restarts failed",
      errors[:5])
sys.exit(1 if errors or failed_restarts or not all(ok) else 0)

"""slowfs: a one-file FUSE file system whose reads wait until the test lets them go.

A test mounts it inside a document root to make a file read that blocks for as long as the
test wants, deterministically (a cold page-cache read only blocks for a disk's latency): the
server's loop must go on serving while such a read is outstanding (issue 14: TLS bodies are
read off the loop). It speaks the kernel's FUSE protocol on /dev/fuse directly (no libfuse or
Python binding on the machine), just the requests a static server makes: INIT, LOOKUP,
GETATTR, OPEN/OPENDIR, READ, FLUSH/RELEASE; the others get ENOSYS. Mounting needs root
(mount(2)); SlowFS.mount raises OSError otherwise, for the test to skip.

    fs = SlowFS(root / "cold", "slow.bin", data)   # mounts; fs.gate is closed
    fs.wait_read()                                  # a READ reached us and waits
    fs.release()                                    # answer it and all later reads at once
    fs.unmount()
"""
import ctypes
import errno
import os
import struct
import threading

IN_HEADER = struct.Struct("<IIQQIIIHH")  # len, opcode, unique, nodeid, uid, gid, pid, ext, pad
OUT_HEADER = struct.Struct("<IiQ")  # len, error, unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")
LOOKUP, FORGET, GETATTR, OPEN, READ, RELEASE = 1, 2, 3, 14, 15, 18
FLUSH, INIT, OPENDIR, RELEASEDIR, INTERRUPT, BATCH_FORGET = 25, 26, 27, 29, 36, 42
NO_REPLY = {FORGET, BATCH_FORGET, INTERRUPT}
MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2
FILE_NODE = 2
ASYNC_READ = 1  # FUSE_ASYNC_READ: readahead sends its READs without waiting for them

_libc = ctypes.CDLL(None, use_errno=True)


class SlowFS:
    def __init__(self, mountpoint, name, data):
        self.mountpoint = str(mountpoint)
        self.name = name.encode()
        self.data = data
        self.gate = threading.Event()  # set: reads are answered at once
        self.reads = 0  # READ requests received
        self._read_seen = threading.Event()
        self._held = []
        self._lock = threading.Lock()
        os.makedirs(self.mountpoint, exist_ok=True)
        self.fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        opts = f"fd={self.fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
        if _libc.mount(b"slowfs", self.mountpoint.encode(), b"fuse.slowfs",
                       MS_NOSUID | MS_NODEV, opts) != 0:
            err = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(err, f"mount fuse: {os.strerror(err)}")
        self.mounted = True
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    # -- the test's side --------------------------------------------------------------------

    def wait_read(self, timeout=10.0):
        """True once a READ has arrived (and, with the gate closed, waits for release)."""
        return self._read_seen.wait(timeout)

    def release(self):
        """Answers the held reads and every later one at once."""
        with self._lock:
            self.gate.set()
            held, self._held = self._held, []
        for unique, off, size in held:
            self._reply_read(unique, off, size)

    def unmount(self):
        self.release()
        if self.mounted:
            self.mounted = False
            _libc.umount2(self.mountpoint.encode(), MNT_DETACH)
        self._thread.join(timeout=5)
        try:
            os.close(self.fd)
        except OSError:
            pass

    # -- the file system --------------------------------------------------------------------

    def _attr(self, node):
        if node == FILE_NODE:
            mode, size, nlink = 0o100644, len(self.data), 1
        else:
            mode, size, nlink = 0o040755, 0, 2
        t = 1700000000
        return ATTR.pack(node, size, (size + 511) // 512, t, t, t, 0, 0, 0, mode, nlink, 0, 0, 0,
                         4096, 0)

    def _reply(self, unique, payload=b"", error=0):
        try:
            os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), -error, unique)
                     + payload)
        except OSError:
            pass  # the request was interrupted or the file system is gone

    def _reply_read(self, unique, off, size):
        self._reply(unique, self.data[off:off + size])

    def _serve(self):
        while True:
            try:
                msg = os.read(self.fd, (1 << 20) + 4096)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.EAGAIN):
                    continue
                return  # ENODEV: unmounted
            if not msg:
                return
            _, op, unique, node = IN_HEADER.unpack_from(msg)[:4]
            body = msg[IN_HEADER.size:]
            if op in NO_REPLY:
                continue
            if op == INIT:
                major, minor, readahead = struct.unpack_from("<III", body)
                # major, minor, max_readahead, flags, max_background, congestion_threshold,
                # max_write, time_gran, max_pages, map_alignment, flags2, unused[7]
                out = struct.pack("<IIIIHHIIHHI7I", 7, min(minor, 31), readahead, ASYNC_READ, 16, 12,
                                  1 << 17, 1, 32, 0, 0, *([0] * 7))
                self._reply(unique, out)
            elif op == LOOKUP:
                if node == 1 and body.rstrip(b"\0") == self.name:
                    self._reply(unique, struct.pack("<QQQQII", FILE_NODE, 1, 60, 60, 0, 0)
                                + self._attr(FILE_NODE))
                else:
                    self._reply(unique, error=errno.ENOENT)
            elif op == GETATTR:
                self._reply(unique, struct.pack("<QII", 60, 0, 0) + self._attr(node))
            elif op in (OPEN, OPENDIR):
                self._reply(unique, struct.pack("<QII", 0, 0, 0))
            elif op in (RELEASE, RELEASEDIR, FLUSH):
                self._reply(unique)
            elif op == READ:
                _, off, size = struct.unpack_from("<QQI", body)
                with self._lock:
                    self.reads += 1
                    if not self.gate.is_set():
                        self._held.append((unique, off, size))
                        self._read_seen.set()
                        continue
                self._read_seen.set()
                self._reply_read(unique, off, size)
            else:
                self._reply(unique, error=errno.ENOSYS)

"""Gives kernel TLS an AES-128-GCM and a ChaCha20-Poly1305 transmit key on a loopback socket and
prints tls_tx=NAME for each the kernel took (tests/vm/selftest.sh runs it in the guest): the
kernel must load the crypto modules a key needs on demand, through the guest's modprobe."""
import socket
import struct

TCP_ULP, SOL_TLS, TLS_TX = 31, 282, 1
# name, cipher type, then the sizes of iv, key, salt in its tls12_crypto_info_* struct
CIPHERS = (("aes-gcm", 51, 8, 16, 4), ("chacha20", 54, 12, 32, 0))

for name, cipher, iv, key, salt in CIPHERS:
    with socket.socket() as lsock, socket.socket() as sock:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen()
        sock.connect(lsock.getsockname())
        info = struct.pack("<HH", 0x0303, cipher) + bytes(iv + key + salt + 8)  # + rec_seq
        try:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_ULP, b"tls")
            sock.setsockopt(SOL_TLS, TLS_TX, info)
            print(f"tls_tx={name}")
        except OSError as e:
            print(f"tls_tx={name} refused: {e}")

"""HTTP/3's transport (issue 29): a client whose address changes mid-download keeps its
connection on a server with two workers (datagrams routed to the worker by connection ID,
whatever their source), and the download arrives byte-exact."""

import random

import pytest

from h3client import h3_get_moving

pytestmark = pytest.mark.schemes("https")

LARGE = random.Random(29).randbytes(3 << 20)


@pytest.fixture(scope="module")
def h3root(tmp_path_factory):
    root = tmp_path_factory.mktemp("h3root")
    (root / "large.bin").write_bytes(LARGE)
    return root


def test_client_that_moves_keeps_its_connection(make_server, h3root):
    """Four connections at once to two workers, each moving three times during a 3 MiB
    download: to a new port on 127.0.0.2 with a new connection ID (migration), then a new port
    on 127.0.0.1 and one on 127.0.0.2 again (NAT rebinding, the ID kept). (A new ID while
    ngtcp2 0.12 still validates the path before is refused by its count of the client's IDs,
    CONNECTION_ID_LIMIT_ERROR, when aioquic replaces the one it retires at once.) Each move lands on a worker by the kernel's
    hash of the new 4-tuple unless the server routes by connection ID: twelve moves with two
    workers, so a server that does not route fails all but once in 4,096 runs."""
    srv = make_server(h3root, args=("-v",))
    assert "datagrams routed to workers by connection ID: yes" in srv.stderr_text()
    got = h3_get_moving("127.0.0.1", srv.port, srv.ca, "/large.bin",
                        ["127.0.0.2", "127.0.0.1", "127.0.0.2"], conns=4)
    for resp, moved in got:
        assert resp.status == 200
        assert bytes(resp.body) == LARGE
        assert [a[0] for a in moved] == ["::ffff:127.0.0.2", "::ffff:127.0.0.1",
                                         "::ffff:127.0.0.2"], moved
